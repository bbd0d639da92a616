# zt — build, test, bench.
#   make            build ./zt (reports what it found)
#   make test       unit tests (C) and CLI tests (shell); CLI=none: unit tests only
#   make SAN=1 ...  the same with ASan + UBSan, in build-san/
#   make bench      benchmarks (appends to bench/RESULTS.md)
# Switches: NO_CUDA=1 NO_MPI=1 NO_URING=1 NO_CURL=1 NO_SPM=1 NO_DNNL=1 turn an optional part off.

CC      ?= gcc
NVCC    ?= /usr/local/cuda/bin/nvcc
SAN     ?= 0
BUILD   := $(if $(filter 1,$(SAN)),build-san,build)

comma   := ,
SANFLAGS := -fsanitize=address$(comma)undefined
OPT     := $(if $(filter 1,$(SAN)),-O1 -fno-omit-frame-pointer $(SANFLAGS) -fno-sanitize-recover=undefined,-O3)
CFLAGS  += -std=gnu11 -g $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter -fopenmp -I. -MMD -MP
LDFLAGS += $(if $(filter 1,$(SAN)),$(SANFLAGS)) -fopenmp
LDLIBS  += -lm

# --- what this machine has ------------------------------------------------------------
# The two required libraries are checked by the targets that build (the $(BUILD)/.flags
# recipe below), not here, so that make demo, make clean and the like parse on a bare machine.
have_pc = $(shell pkg-config --exists $(1) 2>/dev/null && echo 1)
HAVE_OPENBLAS := $(call have_pc,openblas)
HAVE_CJSON    := $(call have_pc,libcjson)
HAVE_PCRE2    := $(call have_pc,libpcre2-8)
HAVE_ICU      := $(call have_pc,icu-uc)
MISSING       := $(strip $(if $(HAVE_OPENBLAS),,OpenBLAS) $(if $(HAVE_CJSON),,cJSON) $(if $(HAVE_PCRE2),,PCRE2) \
                         $(if $(HAVE_ICU),,ICU))
ifeq ($(HAVE_OPENBLAS),1)
CFLAGS += $(shell pkg-config --cflags openblas)
LDLIBS += $(shell pkg-config --libs openblas)
endif
ifeq ($(HAVE_CJSON),1)
CFLAGS += $(shell pkg-config --cflags libcjson)
LDLIBS += $(shell pkg-config --libs libcjson)
endif
# PCRE2 (8-bit, UTF and Unicode properties): the tokenizer.json pre-tokenizer regexes
ifeq ($(HAVE_PCRE2),1)
CFLAGS += $(shell pkg-config --cflags libpcre2-8)
LDLIBS += $(shell pkg-config --libs libpcre2-8)
endif
# ICU: the tokenizer.json normalizers NFD, NFKC, NFKD and Lowercase
ifeq ($(HAVE_ICU),1)
CFLAGS += $(shell pkg-config --cflags icu-uc)
LDLIBS += $(shell pkg-config --libs icu-uc)
endif

HAVE_MPI   := $(if $(NO_MPI),,$(call have_pc,ompi-c))
HAVE_URING := $(if $(NO_URING),,$(call have_pc,liburing))
HAVE_CURL  := $(if $(NO_CURL),,$(call have_pc,libcurl libcrypto))
HAVE_SPM   := $(if $(NO_SPM),,$(call have_pc,sentencepiece))
# oneDNN (Debian's libdnnl-dev ships no pkg-config file): bf16 and fp32 GEMMs, kernels/cpu/gemm_dnnl.c
HAVE_DNNL  := $(if $(NO_DNNL),,$(shell echo '\#include <oneapi/dnnl/dnnl.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1))
# (the sanitizer pass skips CUDA: the plain build compiles and links it)
HAVE_CUDA  := $(if $(NO_CUDA)$(filter 1,$(SAN)),,$(shell test -x $(NVCC) && echo 1))

mark = $(if $(1),✓,✗)
REPORT := OpenBLAS $(call mark,$(HAVE_OPENBLAS))  cJSON $(call mark,$(HAVE_CJSON))  PCRE2 $(call mark,$(HAVE_PCRE2))  ICU $(call mark,$(HAVE_ICU))  MPI $(call mark,$(HAVE_MPI))  liburing $(call mark,$(HAVE_URING))  \
          libcurl $(call mark,$(HAVE_CURL))  sentencepiece $(call mark,$(HAVE_SPM))  oneDNN $(call mark,$(HAVE_DNNL))  CUDA $(call mark,$(HAVE_CUDA))

ifeq ($(HAVE_MPI),1)
CFLAGS += -DZT_HAVE_MPI $(shell pkg-config --cflags ompi-c)
LDLIBS += $(shell pkg-config --libs ompi-c)
endif

ifeq ($(HAVE_URING),1)
CFLAGS += -DZT_HAVE_URING $(shell pkg-config --cflags liburing)
LDLIBS += $(shell pkg-config --libs liburing)
endif

# libcurl for zt download (lib/hub/*_curl.c), OpenSSL's libcrypto for its sha256 checks
ifeq ($(HAVE_CURL),1)
CFLAGS += -DZT_HAVE_CURL $(shell pkg-config --cflags libcurl libcrypto)
LDLIBS += $(shell pkg-config --libs libcurl libcrypto)
endif

ifeq ($(HAVE_DNNL),1)
LDLIBS += -ldnnl
endif

ifeq ($(HAVE_SPM),1)
CFLAGS += -DZT_HAVE_SPM
LDLIBS += $(shell pkg-config --libs sentencepiece) -lstdc++
endif
CXXFLAGS := $(filter-out -std=gnu11,$(CFLAGS)) -std=gnu++17

# CUDA: the backend (lib/backend/backend_cuda.c + kernels/cuda/*.cu, Hopper sm_90a machine code
# plus PTX that newer GPUs compile at load) is a shared library, BUILD/libzt_cuda.so, that zt
# loads when a recipe asks for the GPU (lib/backend/cuda_loader.c); zt itself never links CUDA.
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
NVFLAGS := -O3 -std=c++17 -I. -I$(CUDA_HOME)/include -MMD -MP -Xcompiler -Wall,-fPIC \
           -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++
LDFLAGS += -rdynamic

# --- sources --------------------------------------------------------------------------
# tokenizers/*_spm.cc need libsentencepiece; tokenizers/*_nospm.c stand in without it;
# likewise lib/comm/*_mpi.c and *_nompi.c for Open MPI, lib/offload/*_uring.c and *_nouring.c
# for liburing, lib/hub/*_curl.c and *_nocurl.c for libcurl
SPM_SRC   := $(if $(HAVE_SPM),$(wildcard tokenizers/*_spm.cc),$(wildcard tokenizers/*_nospm.c))
MPI_SRC   := $(if $(HAVE_MPI),$(wildcard lib/comm/*_mpi.c),$(wildcard lib/comm/*_nompi.c))
URING_SRC := $(if $(HAVE_URING),$(wildcard lib/offload/*_uring.c),$(wildcard lib/offload/*_nouring.c))
CURL_SRC  := $(if $(HAVE_CURL),$(wildcard lib/hub/*_curl.c),$(wildcard lib/hub/*_nocurl.c))
DNNL_SRC  := $(if $(HAVE_DNNL),$(wildcard kernels/cpu/*_dnnl.c),$(wildcard kernels/cpu/*_nodnnl.c))
OPTIONAL  := %_nospm.c %_mpi.c %_nompi.c %_uring.c %_nouring.c %_curl.c %_nocurl.c %_dnnl.c %_nodnnl.c %_cuda.c
LIB_SRC   := $(sort $(filter-out $(OPTIONAL),$(wildcard lib/*/*.c lib/*/*/*.c kernels/cpu/*.c tokenizers/*.c)) \
                     $(MPI_SRC) $(URING_SRC) $(CURL_SRC) $(DNNL_SRC))
CUDA_OBJ  := $(if $(HAVE_CUDA),$(patsubst %.c,$(BUILD)/%.o,$(wildcard lib/*/*_cuda.c) lib/optim/adamw_consts.c) \
                               $(patsubst %.cu,$(BUILD)/%.o,$(sort $(wildcard kernels/cuda/*.cu))))
CUDA_SO   := $(if $(HAVE_CUDA),$(BUILD)/libzt_cuda.so)
CMD_SRC   := $(sort $(wildcard cmd/*.c))
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
# The gradient-check build: the compute path compiled with zt_real = double.
F64_SRC   := $(sort $(filter-out %_cuda.c %_dnnl.c %_nodnnl.c %cuda_loader.c lib/model/open.c,\
                     $(wildcard kernels/cpu/*.c lib/backend/*.c lib/model/*.c)) $(DNNL_SRC))
F64_TESTS := $(filter tests/unit/test_grad%,$(TEST_SRC))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(patsubst %.cc,$(BUILD)/%.o,$(filter %.cc,$(SPM_SRC))) \
             $(patsubst %.c,$(BUILD)/%.o,$(filter %.c,$(SPM_SRC)))
CMD_OBJ   := $(CMD_SRC:%.c=$(BUILD)/%.o)
F64_OBJ   := $(F64_SRC:%.c=$(BUILD)/f64/%.o)
CORE_OBJ  := $(filter-out $(F64_SRC:%.c=$(BUILD)/%.o),$(LIB_OBJ))
TEST_BIN  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(filter-out $(F64_TESTS),$(TEST_SRC)))
F64_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(F64_TESTS))
# the CLI tests' helper (tests/tool/zt-test-tool.c): zt's internals as the tests need them
TEST_TOOL := $(BUILD)/zt-test-tool
# tests/gpu: built into BUILD/gpu wherever CUDA is (CI links them), run by tests/gpu/run.sh on a GPU machine
GPU_BIN   := $(if $(HAVE_CUDA),$(patsubst tests/gpu/%.c,$(BUILD)/gpu/%,$(wildcard tests/gpu/*.c)))

ZT := $(if $(filter 1,$(SAN)),zt-san,zt)

# Per-file ISA flags: *_avx512.c and *_avx2.c are only entered after a runtime CPU check.
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c
ISA_avx2   := -mavx2 -mfma -mf16c
isa = $(if $(findstring _avx512,$(1)),$(ISA_avx512),$(if $(findstring _avx2,$(1)),$(ISA_avx2)))

.PHONY: all test test-san tests bench demo fuzz clean report format lint check-libs
all: report $(ZT) $(CUDA_SO)

report:
	@echo "zt build: $(REPORT)"

# Every object depends on $(BUILD)/.flags, so a missing required library stops the build here.
check-libs:
	@$(if $(MISSING),echo "zt build: not found: $(MISSING) (scripts/install-deps.sh installs them)" >&2; exit 2,:)
$(BUILD)/.flags fuzz: check-libs

# A changed switch or flag rebuilds everything.
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS) $(LDFLAGS) $(LDLIBS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(LDFLAGS) $(LDLIBS)' > $@
FORCE:

# The git commit, for zt version, zt env and run.json: those objects rebuild when it changes.
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
$(BUILD)/.commit: FORCE
	@mkdir -p $(BUILD)
	@echo '$(COMMIT)' | cmp -s - $@ || echo '$(COMMIT)' > $@
VERSIONED := $(BUILD)/cmd/version.o $(BUILD)/cmd/env.o $(BUILD)/lib/train/run/rundir.o
$(VERSIONED): $(BUILD)/.commit
$(VERSIONED): CFLAGS += -DZT_COMMIT='"$(COMMIT)"'

$(BUILD)/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(call isa,$<) -c $< -o $@

$(BUILD)/%.o: %.cc $(BUILD)/.flags
	@mkdir -p $(dir $@)
	@echo "  CXX     $<"
	@$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu $(BUILD)/.flags
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/f64/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	@echo "  CC f64  $<"
	@$(CC) $(CFLAGS) -DZT_REAL_DOUBLE $(call isa,$<) -c $< -o $@

$(CUDA_OBJ): CFLAGS += -fPIC -I$(CUDA_HOME)/include
$(BUILD)/lib/backend/cuda_loader.o: CFLAGS += -DZT_CUDA_LIB_DIR='"$(abspath $(BUILD))"'
$(CUDA_SO): $(CUDA_OBJ)
	@echo "  LINK    $@"
	@$(CC) -shared -Wl,-soname,libzt_cuda.so $^ -o $@ $(CUDA_LIBS)

$(BUILD)/libzt.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/libzt_f64.a: $(F64_OBJ) $(CORE_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(ZT): $(CMD_OBJ) $(BUILD)/libzt.a
	@echo "  LINK    $@"
	@$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# (all of libzt: libzt_cuda.so takes zt_fail and friends from the executable)
$(BUILD)/gpu/%: tests/gpu/%.c $(BUILD)/libzt.a $(CUDA_SO) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	@$(CC) $(CFLAGS) -I$(CUDA_HOME)/include $< -Wl,--whole-archive $(BUILD)/libzt.a -Wl,--no-whole-archive $(CUDA_SO) \
	    -o $@ $(LDFLAGS) $(LDLIBS) $(CUDA_LIBS) -Wl,-rpath,'$$ORIGIN/..'

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libzt.a $(BUILD)/.flags
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	@$(CC) $(CFLAGS) $< $(BUILD)/libzt.a -o $@ $(LDFLAGS) $(LDLIBS)

$(TEST_TOOL): tests/tool/zt-test-tool.c $(BUILD)/libzt.a $(BUILD)/.flags
	@echo "  TOOL    $@"
	@$(CC) $(CFLAGS) $< $(BUILD)/libzt.a -o $@ $(LDFLAGS) $(LDLIBS)

$(F64_BIN): $(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libzt_f64.a $(BUILD)/.flags
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	@$(CC) $(CFLAGS) -DZT_REAL_DOUBLE $< $(BUILD)/libzt_f64.a -o $@ $(LDFLAGS) $(LDLIBS)

tests: $(TEST_BIN) $(F64_BIN) $(GPU_BIN) $(TEST_TOOL)

# CLI: which tests/cli files make test runs (globs; none: the unit tests alone).
# ZT_CPU=scalar|avx2|avx512 in the environment runs the tests on that CPU kernel level.
CLI     ?= t[0-9]*.sh
# the sanitizer pass (make SAN=1 test-san): unit tests, the bad-input CLI tests, the image-text saves and
# multi-rank ones (2 to 4 ranks; Open MPI's own allocations suppressed: tests/lsan-openmpi.supp)
SAN_CLI := t[0-9]*-bad-*.sh t1100-comm.sh t1410-export-gguf.sh t1500-zero.sh t1630-adamw8bit.sh t2450-image-text.sh
test: all tests
	@OMP_NUM_THREADS=2 scripts/run-tests.sh $(BUILD) $(ZT) $(foreach g,$(CLI),'$(g)')

test-san: all tests
	@OMP_NUM_THREADS=2 scripts/run-tests.sh $(BUILD) $(ZT) $(foreach g,$(SAN_CLI),'$(g)')

bench: all
	@bench/run.sh
	@bench/lora.sh
	@bench/bf16_demo.sh
	@bench/zero.sh
	@bench/offload.sh
	@if [ -n "$(BENCH_3B)" ]; then bench/offload3b.sh; else echo "bench: BENCH_3B=1 also runs bench/offload3b.sh (15 minutes, 62 GB of disk)"; fi

demo:
	@scripts/demo.sh

# libFuzzer harnesses under ASan + UBSan (any finding stops the run), each for FUZZ_SECONDS on
# its seed corpus. A harness NAME is tests/fuzz/fuzz_NAME.c with the product sources it links in
# FUZZ_NAME_SRC, seeds in tests/fuzz/corpus/NAME and, when there, tests/fuzz/NAME.dict;
# `make fuzz-NAME` builds and runs one.
FUZZ_SECONDS ?= 60
FUZZ_CC       = clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I. \
                $(shell pkg-config --cflags libcjson)
FUZZ_LIBS     = $(shell pkg-config --libs libcjson libpcre2-8 icu-uc) -lm
FUZZ_OPTS    := -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
FUZZ_toml_SRC             := lib/toml/toml.c
FUZZ_safetensors_SRC      := lib/ckpt/safetensors_*.c lib/core/*.c
FUZZ_jinja_SRC            := lib/jinja/jinja*.c lib/core/*.c
FUZZ_cache_SRC            := lib/data/cache.c lib/data/dataset.c lib/core/*.c
FUZZ_llama_config_SRC     := lib/model/llama_config*.c lib/core/*.c
FUZZ_launch_SRC           := lib/launch/*.c lib/core/*.c
FUZZ_jsonl_SRC            := lib/data/*.c lib/jinja/*.c tokenizers/*.c lib/core/*.c
FUZZ_tokenizer_SRC        := tokenizers/*.c lib/core/*.c
FUZZ_tokenizer_config_SRC := tokenizers/*.c lib/core/*.c
FUZZ_disk_cache_SRC       := lib/plan/disk_cache.c
FUZZ_reward_SRC           := lib/train/rlhf/reward_program.c lib/core/*.c
FUZZ_hub_SRC              := lib/hub/hub_api.c lib/hub/hub_cache.c lib/hub/hub_config.c lib/hub/hub_fs.c lib/core/*.c
FUZZ_recipe_SRC           := lib/recipe/*.c lib/toml/*.c lib/data/*.c lib/jinja/*.c tokenizers/*.c lib/core/*.c \
                             lib/offload/offload.c lib/optim/schedule.c lib/optim/optim.c lib/backend/devices.c \
                             lib/model/lora_names.c
FUZZ_generate_SRC         := lib/generate/generate_input.c lib/data/jsonl.c lib/data/messages.c lib/core/*.c
FUZZ_state_SRC            := lib/ckpt/state.c lib/ckpt/state_files.c lib/core/*.c
FUZZ_gguf_tokenizer_SRC   := lib/export/gguf.c lib/export/gguf_tokenizer.c lib/core/*.c
FUZZ_lora_config_SRC      := lib/model/lora_config.c lib/model/lora_names.c lib/model/lora_pattern.c lib/model/llama_config*.c lib/core/*.c
FUZZ_NAMES := $(patsubst FUZZ_%_SRC,%,$(filter FUZZ_%_SRC,$(.VARIABLES)))

fuzz: $(addprefix fuzz-,$(FUZZ_NAMES))
.PRECIOUS: build-fuzz/fuzz_%

.SECONDEXPANSION:
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $$(wildcard $$(FUZZ_$$*_SRC) lib/*/*.h tokenizers/*.h tests/fuzz/*.h)
	@mkdir -p build-fuzz
	$(FUZZ_CC) $< $(wildcard $(FUZZ_$*_SRC)) -o $@ $(FUZZ_LIBS)

# (libFuzzer's progress goes to build-fuzz/NAME.log: the summary line, or its last lines on a finding)
fuzz-%: build-fuzz/fuzz_%
	@mkdir -p build-fuzz/corpus/$*
	@$< -max_total_time=$(FUZZ_SECONDS) $(FUZZ_OPTS) $(if $(wildcard tests/fuzz/$*.dict),-dict=tests/fuzz/$*.dict) \
	    build-fuzz/corpus/$* tests/fuzz/corpus/$* >build-fuzz/$*.log 2>&1 \
	  && echo "fuzz $*: $$(grep -m1 '^Done' build-fuzz/$*.log), no finding" \
	  || { echo "fuzz $*: FINDING (build-fuzz/$*.log):"; tail -n 60 build-fuzz/$*.log; exit 1; }

clean:
	rm -rf build build-san build-fuzz zt zt-san

# the style is .clang-format's; tokenizers/unicode_tables.c is generated (gen_unicode_tables.py)
format:
	clang-format -i $(filter-out tokenizers/unicode_tables.c,$(LIB_SRC)) $(CMD_SRC) $(TEST_SRC) tests/tool/*.c \
	    $(wildcard lib/*/*.h lib/*/*/*.h kernels/cpu/*.h)

lint:
	cppcheck --quiet --enable=warning,performance --error-exitcode=1 -I. $(LIB_SRC) $(CMD_SRC)

-include $(LIB_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(F64_OBJ:.o=.d) $(CUDA_OBJ:.o=.d)
