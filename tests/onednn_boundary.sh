#!/bin/bash
# tests/onednn_boundary.sh BUILD_DIR — every oneDNN function that the backend's C files call
# goes through backends/cpu_onednn/boundary.cpp (which catches what libdnnl throws), except the
# few listed here, which only read a descriptor or a CPU flag and do not allocate or throw.
set -eu
allowed="dnnl_get_effective_cpu_isa dnnl_memory_desc_get_size dnnl_primitive_desc_query_md"
objs=$(find "$1" -path '*torc_onednn.dir/*.c.o')
[ -n "$objs" ] || { echo "no object files of torc_onednn under $1"; exit 1; }
bad=0
for sym in $(nm -u $objs | awk '$2 ~ /^dnnl_/ {print $2}' | sort -u); do
    if [[ " $allowed " != *" $sym "* ]]; then
        echo "called directly, not through boundary.h: $sym"; bad=1
    fi
done
wrapped=$(nm -u $objs | awk '$2 ~ /^onednn_safe_dnnl_/ {print $2}' | sort -u | wc -l)
echo "$wrapped oneDNN functions called through the boundary"
[ $bad -eq 0 ] && [ "$wrapped" -gt 0 ]
