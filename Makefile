# dpc: build the compiler (bin/dpc), the runtime (runtime/libdprt.a), run tests.
#
# O is the output root: empty for the normal build (bin/, build/, runtime/),
# build/san/ for the sanitizer build that `make test-sanitize` makes.
O       ?=
CC      ?= cc
LLVM_CONFIG ?= $(shell command -v llvm-config-14 || command -v llvm-config)
WARN    = -Wall -Wextra -Wno-unused-parameter
CFLAGS  ?= -O2 -g
SAN     ?=
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN)
LLVM_CFLAGS = $(shell $(LLVM_CONFIG) --cflags 2>/dev/null | sed 's/-D_GNU_SOURCE//')
LLVM_LIBS   = $(shell $(LLVM_CONFIG) --ldflags 2>/dev/null) $(shell $(LLVM_CONFIG) --libs 2>/dev/null) $(shell $(LLVM_CONFIG) --system-libs 2>/dev/null)

B = $(O)build
COMPILER_SRC = $(filter-out compiler/main.c,$(wildcard compiler/*.c compiler/*/*.c))
# common/: what both sides use (the revolve schedules, the SVG writer, the ABI's constants, dropout's
# random numbers), built into both libraries
COMMON_SRC   = $(wildcard common/*.c)
COMMON_OBJ   = $(COMMON_SRC:%.c=$(B)/%.o)
COMPILER_OBJ = $(COMPILER_SRC:%.c=$(B)/%.o) $(COMMON_OBJ)
RUNTIME_SRC  = $(wildcard runtime/*.c runtime/cpu/*.c)
RUNTIME_OBJ  = $(RUNTIME_SRC:%.c=$(B)/%.o) $(COMMON_OBJ)

CUDA_HOME ?= /usr/local/cuda
HAVE_CUDA := $(shell test -f $(CUDA_HOME)/include/cuda.h && test -f $(CUDA_HOME)/include/cublas_v2.h && echo 1)
CUDA_LIB := $(if $(HAVE_CUDA),$(O)runtime/libdprt_cuda.a)
# dpc's default target: cuda when the toolkit is here
CUDA_DEF := $(if $(HAVE_CUDA),-DDPC_HAVE_CUDA)

all: $(O)bin/dpc $(O)runtime/libdprt.a $(CUDA_LIB) $(if $(O),$(O)runtime/dpc.map $(O)runtime/dpc.h)

$(B)/compiler/%.o: compiler/%.c $(wildcard compiler/*.h compiler/*/*.h compiler/ir/ops.def common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -pthread $(LLVM_CFLAGS) -DDPC_CUDA_HOME='"$(CUDA_HOME)"' -DDPC_SOURCE='"$(CURDIR)"' $(CUDA_DEF) -c $< -o $@

# The Python the ONNX converter runs under by default: the one `python3` is here, resolved past any shim
# (pyenv's costs 70 ms a run), which `make deps` installs the converter's requirements into; in a stamp
# rewritten only when it changes. dpc falls back to python3 where it is gone; DPC_PYTHON overrides both.
PYTHON_EXE := $(shell python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
$(B)/compiler/python.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(PYTHON_EXE)' | cmp -s - $@ || echo '$(PYTHON_EXE)' >$@
$(B)/compiler/import.o: $(B)/compiler/python.stamp
$(B)/compiler/import.o: ALL_CFLAGS += -DDPC_PYTHON_EXE='"$(PYTHON_EXE)"'

# Which optional headers the runtime finds (__has_include: oneDNN's; OpenBLAS's cblas.h), in a stamp
# rewritten only when the answer changes, so that a runtime built before `make deps` installed them is
# built again with them
HEADERS_FOUND := $(shell for h in oneapi/dnnl/dnnl.h cblas.h; do echo "\#include <$$h>" | $(CC) -E -x c - >/dev/null 2>&1 && echo $$h; done)
$(B)/runtime/headers.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(HEADERS_FOUND)' | cmp -s - $@ || echo '$(HEADERS_FOUND)' >$@
FORCE:

# the runtime is position-independent: dpc --emit=lib links it into a shared library
$(B)/runtime/%.o: runtime/%.c $(wildcard runtime/*.h runtime/*/*.h runtime/*/*.inc common/*.h) $(B)/runtime/headers.stamp
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -pthread -c $< -o $@

# the streamed parameters' optimizer step on the host: vector code, and no contraction into fused
# multiply-adds, which the device's kernels do not make either, and sqrtf as an instruction, which
# vectorises (errno is not read) (runtime/host_step.c)
$(B)/runtime/host_step.o: runtime/host_step.c $(wildcard runtime/*.h common/*.h) $(B)/runtime/headers.stamp
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -O3 -ffp-contract=off -fno-math-errno -pthread -c $< -o $@

$(B)/libdpc.a: $(COMPILER_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(O)bin/dpc: $(B)/compiler/main.o $(B)/libdpc.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -pthread -o $@ $^ $(LLVM_LIBS) -lm

# common/: one source each, in the compiler and in the runtime
$(B)/common/%.o: common/%.c $(wildcard common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -c $< -o $@

$(O)runtime/libdprt.a: $(RUNTIME_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

# beside a build elsewhere (O=...): the library's symbol list and its API's header, as in runtime/
ifneq ($(O),)
$(O)runtime/dpc.map $(O)runtime/dpc.h: $(O)runtime/%: runtime/%
	@mkdir -p $(dir $@)
	cp $< $@
endif

# The CUDA device, built when the CUDA toolkit is here (CUDA_HOME).
$(B)/runtime/gpu/device.o: runtime/gpu/device.c runtime/rt.h runtime/dprt.h $(wildcard common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -I$(CUDA_HOME)/include -c $< -o $@

$(O)runtime/libdprt_cuda.a: $(B)/runtime/gpu/device.o
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

# Unit tests link the same objects as dpc.
$(B)/irgrad: tests/unit/irgrad.c $(B)/libdpc.a
	$(CC) $(ALL_CFLAGS) -pthread -o $@ tests/unit/irgrad.c $(B)/libdpc.a $(LLVM_LIBS) -lm

$(B)/graph: tests/unit/graph.c tests/unit/check.h $(B)/libdpc.a
	$(CC) $(ALL_CFLAGS) -pthread -o $@ tests/unit/graph.c $(B)/libdpc.a $(LLVM_LIBS) -lm

$(B)/select: tests/unit/select.c tests/unit/check.h $(B)/libdpc.a
	$(CC) $(ALL_CFLAGS) -pthread -o $@ tests/unit/select.c $(B)/libdpc.a -lm

# the SIMT emulator on its own, with the runtime's file of it
$(B)/simt: tests/unit/simt.c tests/unit/check.h runtime/cpu/simt.c $(wildcard runtime/*.h runtime/cpu/*.h)
	$(CC) $(ALL_CFLAGS) -o $@ tests/unit/simt.c runtime/cpu/simt.c

$(B)/binomial: tests/unit/binomial.c tests/unit/check.h $(B)/libdpc.a
	$(CC) $(ALL_CFLAGS) -pthread -o $@ tests/unit/binomial.c $(B)/libdpc.a -lm

# Debian packages dpc needs to build and test (run as root), the ONNX
# converter's Python packages (pinned), and the Python package (python/dpc,
# its own pinned requirements), which finds this repository's bin/dpc.
deps:
	apt-get update
	apt-get install -y --no-install-recommends build-essential clang-14 libclang-rt-14-dev llvm-14-dev \
		libopenblas-dev libdnnl-dev python3 python3-pip openmpi-bin
	PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q -r compiler/frontend/onnx/requirements.txt
	PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q -r python/requirements.txt
	PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q ./python
	rm -rf python/build python/*.egg-info

# The builds the test targets start use every core this make may (nproc),
# unless make was given -j itself.
JOBS = $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
TEST_BINS = all $(B)/irgrad $(B)/binomial $(B)/graph $(B)/select $(B)/simt

# The test suite: ends with "N passed, N failed".
test:
	@$(MAKE) -s $(JOBS) $(TEST_BINS)
	@bash tests/run.sh

# The whole suite again with the compiler, the runtime and every executable
# it links built with AddressSanitizer and UndefinedBehaviorSanitizer.
# DPC_HOST_OPT=0: the generated CPU code unoptimized (the same bits; LLVM's
# optimizer, which no sanitizer instruments, took 90% of each compile there).
# intercept_tls_get_addr=0: LeakSanitizer's record of the dynamic TLS of
# oneDNN's OpenMP threads (opened at run time) is garbage on this glibc, and
# its tracer crashes reading it; static TLS is still scanned.
SAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
test-sanitize:
	@$(MAKE) -s $(JOBS) O=build/san/ CFLAGS='-O2 -g' SAN='$(SAN_FLAGS)' all build/san/build/irgrad build/san/build/binomial build/san/build/graph build/san/build/select build/san/build/simt
	@DPC_BUILD=$(CURDIR)/build/san CC='$(CC) $(SAN_FLAGS)' TEST_OUT=$(CURDIR)/tests/out-san DPC_HOST_OPT=0 \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 bash tests/run.sh

# libFuzzer targets (clang): the frontend through the passes before codegen,
# and the runtime's .npy and safetensors readers.
FUZZ_CC    ?= $(shell command -v clang-14 || command -v clang)
FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
# every compiler source but code generation and the driver (no LLVM)
FUZZ_DPC_SRC = $(filter-out compiler/codegen/% compiler/driver.c,$(COMPILER_SRC)) $(COMMON_SRC)
FUZZ_FILES_SRC = runtime/files.c runtime/desc.c
FUZZ_TIME ?= 120

build/fuzz/fuzz_dpc: tests/fuzz/fuzz_dpc.c $(FUZZ_DPC_SRC) $(wildcard compiler/*.h compiler/*/*.h compiler/ir/ops.def common/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_dpc.c $(FUZZ_DPC_SRC) -lm

build/fuzz/fuzz_files: tests/fuzz/fuzz_files.c $(FUZZ_FILES_SRC) $(wildcard runtime/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iruntime -o $@ tests/fuzz/fuzz_files.c $(FUZZ_FILES_SRC) -lm

fuzz-build: build/fuzz/fuzz_dpc build/fuzz/fuzz_files

# Each target for FUZZ_TIME seconds; a crash fails, and its input is printed.
fuzz: fuzz-build
	@FUZZ_TIME=$(FUZZ_TIME) bash tests/fuzz/run.sh

# What CI runs: the suite, the fuzzers, the suite under sanitizers; the last
# line sums all three.
check:
	@$(MAKE) -s $(JOBS) $(TEST_BINS)
	@bash tests/check.sh

# Compile the default sample and train it: shows the plan and the training run.
run: all
	@bash tests/demo.sh

clean:
	rm -rf build bin runtime/libdprt.a runtime/libdprt_cuda.a

.PHONY: all deps test test-sanitize fuzz fuzz-build check run clean
