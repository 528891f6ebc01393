# dpc: build the compiler (bin/dpc), the runtime (runtime/libdprt.a), run tests.
CC      ?= cc
LLVM_CONFIG ?= $(shell command -v llvm-config-14 || command -v llvm-config)
WARN    = -Wall -Wextra -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN)
LLVM_CFLAGS = $(shell $(LLVM_CONFIG) --cflags 2>/dev/null | sed 's/-D_GNU_SOURCE//')
LLVM_LIBS   = $(shell $(LLVM_CONFIG) --ldflags 2>/dev/null) $(shell $(LLVM_CONFIG) --libs 2>/dev/null) $(shell $(LLVM_CONFIG) --system-libs 2>/dev/null)

COMPILER_SRC = $(filter-out compiler/main.c,$(wildcard compiler/*.c compiler/*/*.c))
COMPILER_OBJ = $(COMPILER_SRC:%.c=build/%.o)
RUNTIME_SRC  = $(wildcard runtime/*.c runtime/cpu/*.c)
RUNTIME_OBJ  = $(RUNTIME_SRC:%.c=build/%.o) build/runtime/binomial.o

CUDA_HOME ?= /usr/local/cuda
HAVE_CUDA := $(shell test -f $(CUDA_HOME)/include/cuda.h && test -f $(CUDA_HOME)/include/cublas_v2.h && echo 1)
CUDA_LIB := $(if $(HAVE_CUDA),runtime/libdprt_cuda.a)
# dpc's default target: cuda when the toolkit is here
CUDA_DEF := $(if $(HAVE_CUDA),-DDPC_HAVE_CUDA)

all: bin/dpc runtime/libdprt.a $(CUDA_LIB)

build/compiler/%.o: compiler/%.c $(wildcard compiler/*.h compiler/*/*.h compiler/ir/ops.def)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LLVM_CFLAGS) -DDPC_CUDA_HOME='"$(CUDA_HOME)"' $(CUDA_DEF) -c $< -o $@

build/runtime/%.o: runtime/%.c $(wildcard runtime/*.h runtime/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -c $< -o $@

build/libdpc.a: $(COMPILER_OBJ)
	@rm -f $@
	ar rcs $@ $^

bin/dpc: build/compiler/main.o build/libdpc.a
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $^ $(LLVM_LIBS) -lm

# the binomial schedule generator: one source, in the compiler and in the runtime
build/runtime/binomial.o: compiler/checkpoint_pass/binomial.c compiler/checkpoint_pass/ckpt.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

runtime/libdprt.a: $(RUNTIME_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The CUDA device, built when the CUDA toolkit is here (CUDA_HOME).
build/runtime/gpu/device.o: runtime/gpu/device.c runtime/rt.h runtime/dprt.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -c $< -o $@

runtime/libdprt_cuda.a: build/runtime/gpu/device.o
	@rm -f $@
	ar rcs $@ $^

# Unit tests link the same objects as dpc.
build/irgrad: tests/unit/irgrad.c tests/unit/interp.c tests/unit/interp.h build/libdpc.a
	$(CC) $(CFLAGS) -o $@ tests/unit/irgrad.c tests/unit/interp.c build/libdpc.a $(LLVM_LIBS) -lm

build/binomial: tests/unit/binomial.c build/libdpc.a
	$(CC) $(CFLAGS) -o $@ tests/unit/binomial.c build/libdpc.a -lm

# Debian packages dpc needs to build and test (run as root).
deps:
	apt-get update
	apt-get install -y --no-install-recommends build-essential llvm-14-dev libopenblas-dev python3

test: all build/irgrad build/binomial
	@bash tests/run.sh

# Compile the default sample and train it: shows the plan and the training run.
run: all
	@bash tests/demo.sh

clean:
	rm -rf build bin runtime/libdprt.a runtime/libdprt_cuda.a

.PHONY: all deps test run clean
