# ftl build. `make` builds build/ftl and build/libftl.{a,so}; `make demo` runs the main job;
# `make test` installs what the tests need and runs every test (plain and under ASan+UBSan).

SHARED   ?= $(abspath ../shared)
BUILD    ?= build
CC       ?= cc
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
INTEROP_NODE_DIR ?= $(abspath $(BUILD)/interop-node)

WARN     := -Wall -Wextra -Werror
# Header dependencies name each object both as an absolute and as a relative path, so they hold
# whichever way BUILD is given (make test and its install test pass an absolute one).
DEPFLAGS = -MMD -MP -MT $(abspath $@) -MT $(patsubst $(CURDIR)/%,%,$(abspath $@))
CPPFLAGS := -Iinclude -Isrc -I$(BUILD)/gen -D_GNU_SOURCE
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c17 $(WARN) -pthread -fPIC
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDLIBS   := -lturbojpeg -lpng -lprotobuf-c -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread

# Data parallelism over Open MPI when mpicc is found (MPI=0 builds the single-process stub).
MPI      ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := $(shell mpicc --showme:compile)
MPI_LIBS   := $(shell mpicc --showme:link)
DIST_EXCLUDE := src/parallel/transport_none.c
else
DIST_EXCLUDE := src/parallel/transport_mpi.c
endif
LDLIBS   += $(MPI_LIBS) -ldl

# The CUDA backend when nvcc is found (CUDA=0 leaves it out). The NVIDIA libraries are loaded at
# run time (dlopen), so the build needs only their headers and nvcc for ftl's own kernels, compiled
# for every architecture in CUDA_ARCHS plus PTX of the newest (for later GPUs).
CUDA     ?= $(if $(shell command -v nvcc 2>/dev/null),1,0)
NVCC     ?= nvcc
CUDA_ARCHS ?= 75 80 86 89 90
FATBINS  := $(BUILD)/cuda/kernels.fatbin $(BUILD)/cuda/head_kernels.fatbin
ifeq ($(CUDA),1)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v $(NVCC))))
CUDA_CPPFLAGS := -isystem $(CUDA_HOME)/include
CUDA_SRCS := $(sort $(wildcard src/nn/cuda/*.c))
CUDA_EXCLUDE := src/nn/cuda_none.c
CUDA_OBJ_EXTRA := src/nn/cuda/fatbin
else
CUDA_SRCS :=
CUDA_EXCLUDE :=
CUDA_OBJ_EXTRA :=
endif

GEN_C    := $(BUILD)/gen/onnx.pb-c.c
GEN_H    := $(BUILD)/gen/onnx.pb-c.h
# Every C file under src/, layer subfolders included (src/nn/ir/, src/nn/cpu/kernels/); the CUDA
# backend's own (src/nn/cuda/) only when CUDA=1.
ALL_SRCS := $(filter-out src/nn/cuda/%,$(wildcard src/*/*.c src/*/*/*.c src/*/*/*/*.c))
LIB_SRCS := $(sort $(filter-out src/cli/% $(DIST_EXCLUDE) $(CUDA_EXCLUDE),$(ALL_SRCS)) $(CUDA_SRCS))
CLI_SRCS := $(sort $(wildcard src/cli/*.c))
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
# Test helpers (tests/tools/NAME.c -> build/tools/NAME) and benchmarks (bench/DIR/NAME.c ->
# build/bench/DIR/NAME), linked against libftl.
TOOLS    := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(sort $(wildcard tests/tools/*.c)))
BENCHES  := $(patsubst bench/%.c,$(BUILD)/bench/%,$(sort $(wildcard bench/*/*.c)))

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/onnx.pb-c.o $(CUDA_OBJ_EXTRA:%=$(BUILD)/obj/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_OBJS := $(UNIT_SRCS:%.c=$(BUILD)/obj/%.o)
SAN_LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/san/%.o) $(BUILD)/san/gen/onnx.pb-c.o $(CUDA_OBJ_EXTRA:%=$(BUILD)/san/%.o)
SAN_UNIT_OBJS := $(UNIT_SRCS:%.c=$(BUILD)/san/%.o)

.PHONY: all deps test-deps test demo bench clean fuzz install uninstall
all: $(BUILD)/ftl $(BUILD)/libftl.a $(BUILD)/libftl.so

deps:
	@scripts/install_deps.sh build

test-deps:
	@scripts/install_deps.sh test
	@mkdir -p $(BUILD)
	@bash $(SHARED)/tools/interop/install.sh $(INTEROP_NODE_DIR) >$(BUILD)/interop-install.log 2>&1 || \
	  { cat $(BUILD)/interop-install.log; exit 1; }

# ONNX protobuf bindings are generated at build time from the system's onnx.proto (libonnx-dev).
$(GEN_C) $(GEN_H): $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

$(BUILD)/obj/gen/onnx.pb-c.o: $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) -c $< -o $@
$(BUILD)/san/gen/onnx.pb-c.o: $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) $(SAN_FLAGS) -c $< -o $@

# OpenMP pragmas in these files only: batch preprocessing runs on the backbone's own thread team
# (and in the strided copies, the training plan's host loops and the calibration scan, which share it too)
$(BUILD)/obj/src/nn/preprocess_batch.o $(BUILD)/san/src/nn/preprocess_batch.o: CFLAGS += -fopenmp
$(BUILD)/obj/src/nn/calibration_stats.o $(BUILD)/san/src/nn/calibration_stats.o: CFLAGS += -fopenmp
$(BUILD)/obj/src/nn/cpu/kernels/copy.o $(BUILD)/san/src/nn/cpu/kernels/copy.o: CFLAGS += -fopenmp
$(BUILD)/obj/src/nn/cpu/kernels/attention.o $(BUILD)/san/src/nn/cpu/kernels/attention.o: CFLAGS += -fopenmp
$(BUILD)/obj/src/nn/cpu/kernels/layernorm.o $(BUILD)/san/src/nn/cpu/kernels/layernorm.o: CFLAGS += -fopenmp
$(BUILD)/obj/src/nn/cpu/kernels/max_pool.o $(BUILD)/san/src/nn/cpu/kernels/max_pool.o: CFLAGS += -fopenmp
$(BUILD)/obj/src/nn/cpu/kernels/separable_int8.o $(BUILD)/san/src/nn/cpu/kernels/separable_int8.o: CFLAGS += -fopenmp
$(BUILD)/obj/src/nn/cpu/cpu_train_plan.o $(BUILD)/san/src/nn/cpu/cpu_train_plan.o: CFLAGS += -fopenmp

$(BUILD)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) -c $< -o $@
$(BUILD)/san/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) $(SAN_FLAGS) -c $< -o $@

$(BUILD)/obj/src/parallel/transport_mpi.o $(BUILD)/san/src/parallel/transport_mpi.o: CPPFLAGS += $(MPI_CFLAGS)
$(BUILD)/obj/src/nn/cuda/%.o $(BUILD)/san/src/nn/cuda/%.o: CPPFLAGS += $(CUDA_CPPFLAGS) -DFTL_CUDA_ARCHS='"$(CUDA_ARCHS)"' 

# ftl's kernels: a fatbin per source (the backbone's, the head's), embedded in the library by fatbin.S.
$(BUILD)/cuda/%.fatbin: src/nn/cuda/%.cu src/nn/cuda/kernel_args.h src/nn/cuda/head_kernel_args.h src/train/denormal_flush.h
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -Isrc -O3 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror --fatbin \
	  $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
	  -gencode arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS)) -o $@ $<
$(BUILD)/obj/src/nn/cuda/fatbin.o $(BUILD)/san/src/nn/cuda/fatbin.o: src/nn/cuda/fatbin.S $(FATBINS)
	@mkdir -p $(dir $@)
	$(CC) -c -DFTL_CUDA_FATBIN='"$(word 1,$(FATBINS))"' -DFTL_CUDA_HEAD_FATBIN='"$(word 2,$(FATBINS))"' $< -o $@

$(BUILD)/libftl.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^
VERSION   := $(shell sed -n 's/^#define FTL_VERSION "\(.*\)"/\1/p' include/ftl/base.h)
SOMAJOR   := 0
$(BUILD)/libftl.so: $(LIB_OBJS) Makefile
	$(CC) -shared -Wl,-soname,libftl.so.$(SOMAJOR) -o $@ $(LIB_OBJS) $(LDLIBS)
$(BUILD)/ftl: $(CLI_OBJS) $(BUILD)/libftl.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libftl.a $(LDLIBS)
$(BUILD)/ftl_unit: $(UNIT_OBJS) $(BUILD)/libftl.a
	$(CC) $(CFLAGS) -o $@ $(UNIT_OBJS) $(BUILD)/libftl.a $(LDLIBS)
$(BUILD)/ftl_unit_san: $(SAN_UNIT_OBJS) $(SAN_LIB_OBJS)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(BUILD)/libftl.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libftl.a $(LDLIBS)
# The collectives check under ASan + UBSan (the MPI tests run under the sanitizers too).
$(BUILD)/tools/ftl_dist_check_san: $(BUILD)/san/tests/tools/ftl_dist_check.o $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BUILD)/libftl.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libftl.a $(LDLIBS)
.PRECIOUS: $(BUILD)/obj/%.o
# The CLI linked with the single-process stub instead of Open MPI (what `make MPI=0` builds), for
# the test that such a build refuses to run under a launcher.
STUB_OBJS := $(sort $(filter-out $(BUILD)/obj/src/parallel/transport_mpi.o,$(LIB_OBJS)) $(BUILD)/obj/src/parallel/transport_none.o)
$(BUILD)/ftl_stub: $(CLI_OBJS) $(STUB_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(filter-out $(MPI_LIBS),$(LDLIBS))
# The emulated GPU for tests (tests/cuda_emu): the driver, cuDNN and cuBLAS calls the CUDA backend
# makes, on host memory, with ftl's kernel source compiled for the CPU.
EMU_LIB := $(BUILD)/cuda-emu/libftl_cuda_emu.so
EMU_OBJS := $(patsubst tests/cuda_emu/%.c,$(BUILD)/cuda-emu/%.o,$(wildcard tests/cuda_emu/*.c)) $(BUILD)/cuda-emu/emu_kernels.o
$(BUILD)/cuda-emu/%.o: tests/cuda_emu/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -O2 $(WARN) -fPIC $(CUDA_CPPFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/cuda-emu/emu_kernels.o: tests/cuda_emu/emu_kernels.cpp src/nn/cuda/kernels.cu src/nn/cuda/kernel_args.h \
  src/nn/cuda/head_kernels.cu src/nn/cuda/head_kernel_args.h src/train/denormal_flush.h
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -O2 $(WARN) -fPIC -Isrc -Itests/cuda_emu/include -c $< -o $@
$(EMU_LIB): $(EMU_OBJS)
	$(CXX) -shared -o $@ $^ -lpthread
CUDA_TEST_TARGETS := $(if $(filter 1,$(CUDA)),$(EMU_LIB))

# The CLI without the CUDA backend (what `make CUDA=0` builds), for the test of its --device cuda error.
NOCUDA_OBJS := $(sort $(filter-out $(BUILD)/obj/src/nn/cuda/%,$(LIB_OBJS)) $(BUILD)/obj/src/nn/cuda_none.o)
$(BUILD)/ftl_nocuda: $(CLI_OBJS) $(NOCUDA_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
# The CLI under sanitizers, for the bad-input end-to-end tests.
$(BUILD)/ftl_san: $(CLI_SRCS:%.c=$(BUILD)/san/%.o) $(SAN_LIB_OBJS)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)

# Fuzz targets (tests/fuzz/fuzz_NAME.c). Replay builds (gcc, ASan+UBSan, any input files) run the saved
# regression inputs in `make test`; `make fuzz` builds them with clang's libFuzzer and fuzzes each
# target for FUZZ_SECONDS (tests/fuzz/run.sh: seeds from the test data, findings in build/fuzz/).
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_REPLAY  := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%_replay)
FUZZ_SECONDS ?= 120
$(BUILD)/fuzz/%_replay: $(BUILD)/san/tests/fuzz/%.o $(BUILD)/san/tests/fuzz/replay_main.o $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)
fuzz:
	@scripts/install_deps.sh fuzz
	@$(MAKE) --no-print-directory $(BUILD)/libftl.a
	SHARED=$(SHARED) BUILD=$(abspath $(BUILD)) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_TARGETS)

test:
	@mkdir -p $(BUILD)
	@$(MAKE) --no-print-directory test-deps
	@$(MAKE) --no-print-directory all $(BUILD)/ftl_unit $(BUILD)/ftl_unit_san $(BUILD)/ftl_san $(BUILD)/ftl_stub $(BUILD)/ftl_nocuda $(CUDA_TEST_TARGETS) $(TOOLS) $(BUILD)/tools/ftl_dist_check_san $(FUZZ_REPLAY) python
	SHARED=$(SHARED) BUILD=$(abspath $(BUILD)) INTEROP_NODE_DIR=$(INTEROP_NODE_DIR) tests/run_tests.sh

demo: deps
	$(MAKE) all
	SHARED=$(SHARED) BUILD=$(abspath $(BUILD)) scripts/demo.sh

# `make install PREFIX=/usr/local DESTDIR=...`: the CLI, the libraries (a SONAME'd shared one and
# the static one), the public headers, ftl.pc for pkg-config and the man page.
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  ?= $(PREFIX)/lib
INSTALLED := $(PREFIX)/bin/ftl $(LIBDIR)/libftl.a $(LIBDIR)/libftl.so $(LIBDIR)/libftl.so.$(SOMAJOR) \
             $(LIBDIR)/libftl.so.$(VERSION) $(LIBDIR)/pkgconfig/ftl.pc $(PREFIX)/share/man/man1/ftl.1 \
             $(PREFIX)/include/ftl.h $(patsubst include/%,$(PREFIX)/include/%,$(wildcard include/ftl/*.h))
# ftl.pc is made at every install: it records PREFIX and LIBDIR, which can change between calls.
.PHONY: $(BUILD)/ftl.pc
$(BUILD)/ftl.pc:
	@mkdir -p $(BUILD)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$${prefix}/include' '' \
	  'Name: ftl' 'Description: fast transfer learning: Parquet datasets, ONNX backbones, a trained softmax head' \
	  'Version: $(VERSION)' 'Libs: -L$${libdir} -lftl' 'Libs.private: $(LDLIBS)' 'Cflags: -I$${includedir}' >$@
# The Python package (python/): the C extension over libftl.a and the thin Python layer, in
# build/python/ftl (PYTHONPATH=build/python). Needs python3-dev (scripts/install_deps.sh python).
PYTHON      ?= /usr/bin/python3
PY_INCLUDES  = $(shell $(PYTHON)-config --includes 2>/dev/null)
PY_EXT       = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_MODULE    = $(BUILD)/python/ftl/_ftl$(PY_EXT)
.PHONY: python
python: $(PY_MODULE) $(BUILD)/python/ftl/__init__.py
$(PY_MODULE): python/ftl/_ftl.c $(BUILD)/libftl.a include/ftl.h Makefile
	@mkdir -p $(dir $@)
	@test -n "$(PY_INCLUDES)" || { echo "make python: $(PYTHON)-config not found (scripts/install_deps.sh python installs python3-dev)" >&2; exit 1; }
	$(CC) $(CFLAGS) -Iinclude $(PY_INCLUDES) -shared -o $@ python/ftl/_ftl.c $(BUILD)/libftl.a $(LDLIBS)
$(BUILD)/python/ftl/__init__.py: python/ftl/__init__.py
	@mkdir -p $(dir $@)
	cp $< $@

# the Python package goes where this Python looks under PREFIX (Debian: lib/python3.X/dist-packages)
PY_SITE = $(shell $(PYTHON) -c 'import sys, sysconfig; print("lib/python%d.%d/%s" % (sys.version_info[0], sys.version_info[1], "dist-packages" if sysconfig.get_default_scheme() == "posix_local" else "site-packages"))' 2>/dev/null)
PY_INSTALL_DIR = $(PREFIX)/$(PY_SITE)/ftl
install: all $(BUILD)/ftl.pc $(if $(PY_INCLUDES),python)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include/ftl $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/ftl $(DESTDIR)$(PREFIX)/bin/ftl
	install -m 644 $(BUILD)/libftl.a $(DESTDIR)$(LIBDIR)/libftl.a
	install -m 755 $(BUILD)/libftl.so $(DESTDIR)$(LIBDIR)/libftl.so.$(VERSION)
	ln -sf libftl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libftl.so.$(SOMAJOR)
	ln -sf libftl.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libftl.so
	install -m 644 include/ftl.h $(DESTDIR)$(PREFIX)/include/ftl.h
	install -m 644 include/ftl/*.h $(DESTDIR)$(PREFIX)/include/ftl/
	install -m 644 $(BUILD)/ftl.pc $(DESTDIR)$(LIBDIR)/pkgconfig/ftl.pc
	install -m 644 docs/ftl.1 $(DESTDIR)$(PREFIX)/share/man/man1/ftl.1
	$(if $(PY_INCLUDES),install -d $(DESTDIR)$(PY_INSTALL_DIR) && install -m 644 $(BUILD)/python/ftl/__init__.py $(DESTDIR)$(PY_INSTALL_DIR)/ && install -m 755 $(PY_MODULE) $(DESTDIR)$(PY_INSTALL_DIR)/,@echo "make install: no $(PYTHON)-config: the Python package is not installed (scripts/install_deps.sh python)")
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rm -f $(DESTDIR)$(PY_INSTALL_DIR)/__init__.py $(DESTDIR)$(PY_INSTALL_DIR)/_ftl$(PY_EXT)
	-rmdir $(DESTDIR)$(PY_INSTALL_DIR) $(DESTDIR)$(PREFIX)/$(PY_SITE) $(dir $(DESTDIR)$(PREFIX)/$(PY_SITE)) $(DESTDIR)$(PREFIX)/include/ftl 2>/dev/null

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/san $(BUILD)/cuda-emu -name '*.d' 2>/dev/null)
