/* The CPU device's copy stream against its contract (runtime/rt.h): events
 * numbered in order, each copy complete once waited for, a device-to-host
 * copy bringing back what the device held when it was queued, more copies in
 * flight than the queue holds, sync() waiting for all of them. Prints
 * "ok - " / "not ok - " lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* the CPU device looks up generated kernels; this test launches none */
const RtKernelFn dp_cpu_kernels[1];
const int dp_cpu_nkernels = 0;

static int failures;

static void check(bool ok, const char *what)
{
	printf("%s - copy-stream/%s\n", ok ? "ok" : "not ok", what);
	failures += !ok;
}

enum { CHUNK = 1 << 16, N = 1000 };

int main(void)
{
	const RtDevice *d = &rt_cpu_device;
	d->init();
	uint64_t dev = d->alloc((int64_t)CHUNK * N);
	unsigned char *host = d->host_alloc((int64_t)CHUNK * N), *back = d->host_alloc((int64_t)CHUNK * N);
	for (int64_t i = 0; i < (int64_t)CHUNK * N; i++)
		host[i] = (unsigned char)(i * 7 + i / CHUNK);

	/* host to device: N copies, more than the queue holds, numbered 1..N */
	bool numbered = true;
	int64_t ev[N];
	for (int i = 0; i < N; i++) {
		ev[i] = d->copy(true, dev + (uint64_t)i * CHUNK, host + (size_t)i * CHUNK, CHUNK);
		numbered &= ev[i] == i + 1;
	}
	check(numbered, "events-numbered-in-order");
	/* waiting for copy i makes chunk i (and every earlier one) readable */
	d->copy_wait(ev[N / 2]);
	bool arrived = memcmp((void *)(uintptr_t)dev, host, (size_t)CHUNK * (N / 2 + 1)) == 0;
	check(arrived, "wait-makes-copies-visible");
	d->sync();
	check(memcmp((void *)(uintptr_t)dev, host, (size_t)CHUNK * N) == 0, "sync-waits-for-all-copies");

	/* device to host after compute: the copy brings back what compute wrote
	 * before it was queued */
	unsigned char *devp = (void *)(uintptr_t)dev;
	for (int i = 0; i < CHUNK; i++)
		devp[i] = (unsigned char)(255 - i % 251);
	int64_t e = d->copy(false, dev, back, CHUNK);
	d->copy_sync(e);
	bool same = true;
	for (int i = 0; i < CHUNK; i++)
		same &= back[i] == (unsigned char)(255 - i % 251);
	check(same, "device-to-host-after-compute");

	/* a round trip through the copy stream alone: host -> device -> host */
	memset(back, 0, (size_t)CHUNK * N);
	for (int i = 0; i < N; i++)
		d->copy(true, dev + (uint64_t)i * CHUNK, host + (size_t)i * CHUNK, CHUNK);
	int64_t last = 0;
	for (int i = 0; i < N; i++)
		last = d->copy(false, dev + (uint64_t)i * CHUNK, back + (size_t)i * CHUNK, CHUNK);
	d->copy_sync(last);
	check(last == 2 * N + 1 + N && memcmp(back, host, (size_t)CHUNK * N) == 0, "round-trip-in-queue-order");

	d->host_free(host);
	d->host_free(back);
	d->free(dev);
	printf("%d failed\n", failures);
	return failures != 0;
}
