# tests/xcheck.cmake — the checking and benchmark tools under ctest: torc-xcheck (label "xcheck")
# on the reference against itself (a sanity check of the tool, of the reference's guards and of
# in-place aliasing), on the oneDNN backend when it is built, and against tests/xcheck_faulty.c,
# a backend with planted bugs that each must be reported; a torc-bench smoke run (label "bench").
#
# Run as a script (cmake -DXCHECK_CMD=a|b|c -DXCHECK_RC=n -DXCHECK_EXPECT=re1|re2 -P xcheck.cmake)
# this file runs the command and checks its exit status and that every regex matches its output.
if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "|" ";" cmd "${XCHECK_CMD}")
  string(REPLACE "|" ";" expect "${XCHECK_EXPECT}")
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc STREQUAL "${XCHECK_RC}")
    message(FATAL_ERROR "exit status ${rc}, expected ${XCHECK_RC}")
  endif()
  foreach(re IN LISTS expect)
    if(NOT out MATCHES "${re}")
      message(FATAL_ERROR "the output lacks /${re}/")
    endif()
  endforeach()
  return()
endif()

if(NOT TARGET torc-xcheck)
  return()
endif()

# One test per op group, so ctest -j spreads them and each stays well under a minute even under
# the sanitizers.
set(XCHECK_GROUPS
  "creation:fill,copy,arange,linspace,rand,randn,randint"
  "unary:neg,abs,sign,sqrt,rsqrt,square,reciprocal,exp,log,sin,cos,tanh,sigmoid,relu,gelu,gelu_backward,pow_scalar,erf,erfinv,logical_not"
  "binary:add,sub,mul,div,pow,maximum,minimum,eq,ne,lt,le,gt,ge,logical_and,logical_or,where,floor_divide,remainder,fmod"
  "pointwise:addcmul,addcdiv,lerp"
  "reduce:sum,mean,prod,max,min,argmax,argmin,var,std,norm,logsumexp,softmax,log_softmax"
  "linalg_index:matmul,matmul_rounded,scaled_mm,index_select,gather,masked_select,index_add,scatter_add,masked_scatter,triu,tril"
  "attention:attention,attention_backward"
  "loss:cross_entropy")
set(XCHECK_BACKENDS reference)
if(TORC_WITH_ONEDNN AND TARGET torc_onednn)
  list(APPEND XCHECK_BACKENDS onednn)
endif()
foreach(backend IN LISTS XCHECK_BACKENDS)
  foreach(group IN LISTS XCHECK_GROUPS)
    string(REPLACE ":" ";" parts "${group}")
    list(GET parts 0 gname)
    list(GET parts 1 ops)
    # The reference checks every family through the public API too (--api): the fallback path
    # other backends take must agree with the descriptors built here.
    set(api "")
    if(backend STREQUAL "reference")
      set(api "--api")
    endif()
    add_test(NAME xcheck_${backend}_${gname} COMMAND torc-xcheck --backend ${backend} --op ${ops} ${api} --quiet)
    # (torc-xcheck sets TORC_ONEDNN_MIN_WORK=0 itself: small shape families run on oneDNN's
    # kernels too, not on the reference that oneDNN normally hands small ops to.)
    set_tests_properties(xcheck_${backend}_${gname} PROPERTIES LABELS "xcheck" TIMEOUT 600
      ENVIRONMENT "TORC_NUM_THREADS=2")
  endforeach()
endforeach()

# The fused attention's gradients through scaled_dot_product_attention by finite differences (f64
# where the backend takes it, else f32), beside its values above.
foreach(backend IN LISTS XCHECK_BACKENDS)
  add_test(NAME xcheck_${backend}_attention_grad COMMAND torc-xcheck --backend ${backend} --op attention --grad --quiet)
  set_tests_properties(xcheck_${backend}_attention_grad PROPERTIES LABELS "xcheck" TIMEOUT 600
    ENVIRONMENT "TORC_NUM_THREADS=2")
endforeach()

# Layout sweeps (torc-xcheck --sweep; label "xcheck", so the AddressSanitizer stage runs them too,
# where their tight input buffers make a read past an operand an error): the ops that pack or
# convert operands over every layout of every operand at sizes around the backends' tile and
# vector edges. "tiles" runs the matmuls with TORC_ONEDNN_FMA_GEMM=all (torc's FMA GEMM's tiles at
# every size, f32 too: by default GEMMs under 1M multiply-adds take its small path). Under the ISA
# caps the isa tests run the same sweeps (tools/isa-matrix.sh); in the sanitizer build, where the
# isa tests do not run, "avx2" runs them capped to AVX2 (the AVX2 kernels on a bigger CPU).
if("onednn" IN_LIST XCHECK_BACKENDS)
  set(XCHECK_SWEEPS
    "matmul:matmul:"
    "matmul_other:matmul_rounded,scaled_mm:"
    "convert:copy,layer_norm,layer_norm_backward:"
    "attention:attention,attention_backward:"
    "tiles:matmul,matmul_rounded:TORC_ONEDNN_FMA_GEMM=all")
  if(TORC_SANITIZE)
    list(APPEND XCHECK_SWEEPS
      "avx2:matmul,matmul_rounded,copy,layer_norm,layer_norm_backward,attention,attention_backward:ONEDNN_MAX_CPU_ISA=AVX2+TORC_MAX_CPU_ISA=AVX2")
  endif()
  foreach(sweep IN LISTS XCHECK_SWEEPS)
    string(REPLACE ":" ";" parts "${sweep}")
    list(GET parts 0 sname)
    list(GET parts 1 ops)
    list(GET parts 2 env)  # variables joined by "+"
    set(vars "TORC_NUM_THREADS=2")
    if(env)
      string(REPLACE "+" ";" env "${env}")
      list(APPEND vars ${env})
    endif()
    add_test(NAME xcheck_onednn_sweep_${sname} COMMAND torc-xcheck --backend onednn --op ${ops} --sweep --quiet)
    set_tests_properties(xcheck_onednn_sweep_${sname} PROPERTIES LABELS "xcheck" TIMEOUT 900 ENVIRONMENT "${vars}")
  endforeach()
endif()

# The faulty backend is built for the tests only (not installed), in its own plugin directory.
add_library(torc_xcheck_faulty MODULE ${CMAKE_CURRENT_SOURCE_DIR}/xcheck_faulty.c)
target_include_directories(torc_xcheck_faulty PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
target_compile_options(torc_xcheck_faulty PRIVATE ${TORC_WARNINGS})
set_target_properties(torc_xcheck_faulty PROPERTIES PREFIX "lib" OUTPUT_NAME "torc_xcheck_faulty"
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/plugins)
add_dependencies(torc-xcheck torc_xcheck_faulty)

# xcheck_faulty_test(name exit-status "args|..." "regex|...")
function(xcheck_faulty_test name rc args expect)
  add_test(NAME xcheck_faulty_${name} COMMAND ${CMAKE_COMMAND}
    "-DXCHECK_CMD=$<TARGET_FILE:torc-xcheck>|--backend|xcheck_faulty|--dtype|f32|${args}"
    "-DXCHECK_RC=${rc}" "-DXCHECK_EXPECT=${expect}" -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(xcheck_faulty_${name} PROPERTIES LABELS "xcheck" TIMEOUT 120
    ENVIRONMENT "TORC_PLUGIN_PATH=${CMAKE_BINARY_DIR}/tests/plugins")
endfunction()

xcheck_faulty_test(out_of_bounds 1 "--op|add" "add +f32 +native.*FAIL|out: [0-9]+ byte\\(s\\) written outside its elements")
xcheck_faulty_test(input_write 1 "--op|sub" "sub +f32 +native.*FAIL|the backend wrote into input 1")
xcheck_faulty_test(strides 1 "--op|mul" "mul +f32 +native.*FAIL|\\[transposed, native\\] element")
xcheck_faulty_test(nan 1 "--op|maximum" "maximum +f32 +native.*FAIL|NaN/inf positions differ")
xcheck_faulty_test(precision 1 "--op|exp" "exp +f32 +native.*FAIL|> tol")
xcheck_faulty_test(aliasing 1 "--op|div" "div +f32 +native.*FAIL|\\[inplace, native\\]")
# Correct ops pass, and ops the backend lacks are checked on the fallback path.
xcheck_faulty_test(controls 0 "--op|minimum,ge,fill,matmul"
  "minimum +f32 +native .* ok|ge +f32 +fallback .* ok|fill +f32 +fallback .* ok|matmul +f32 +fallback .* ok|all checks passed")

# torc-bench smoke run (label "bench", excluded from the sanitizer pass): tiny sizes on the
# reference backend, every section once. Never a timed assertion: benchmarks report, they do
# not fail on speed.
if(TARGET torc-bench)
  add_test(NAME bench_smoke COMMAND torc-bench --backend reference --tiny --json)
  set_tests_properties(bench_smoke PROPERTIES LABELS "bench" TIMEOUT 300
    PASS_REGULAR_EXPRESSION "\"cruncher_32_1_8_adam_bf16_ms\"")
  # --gpt on a tiny GPT (its step in child processes, the sampler and the activations' growth):
  # every figure is produced and parsed back; then a bad --gpt value is refused by name.
  add_test(NAME bench_gpt_smoke COMMAND torc-bench --backend reference --gpt --tiny --json)
  set_tests_properties(bench_gpt_smoke PROPERTIES LABELS "bench" TIMEOUT 120
    PASS_REGULAR_EXPRESSION "\"tiny_t1_gpt_bf16_step_ms\".*\"kv_tiny_token_hi_ms\".*\"act_attention_T128_b\"")
  add_test(NAME bench_gpt_flags COMMAND torc-bench --gpt=C)
  set_tests_properties(bench_gpt_flags PROPERTIES LABELS "bench" TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--gpt takes A, B or A,B")
endif()
