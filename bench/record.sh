# bench/record.sh, sourced by the benchmarks: bench_record TITLE INFO TABLE prints a result
# under a heading (the time, the commit, TITLE) and appends it to bench/RESULTS.md;
# bench_cpu is the line that names the CPU and what zt runs on it.
bench_cpu() {
    echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores online);" \
        "$(./zt env 2>/dev/null | grep -m1 '^cpu:'); $(./zt env 2>/dev/null | grep -m1 '^bf16 gemm:')"
}

bench_record() {
    local commit
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
    [ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && commit+=" (uncommitted changes)"
    local head="### $(date -u '+%Y-%m-%d %H:%M UTC') · $commit · $1"
    printf '\n%s\n%s\n\n%s\n' "$head" "$2" "$3"
    printf '\n%s\n%s\n\n%s\n' "$head" "$2" "$3" >> bench/RESULTS.md
}
