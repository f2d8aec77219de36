# in_order.awk EXPECTED LOG: prints "#N: LINE" for the first line of EXPECTED that
# is not in LOG in order (EXPECTED must be a subsequence of LOG, lines compared
# byte for byte), nothing when all are. The test doubles' call logs are checked
# with it (tests/cublas/run_cublas.sh, tests/nccl/run_nccl.sh).
BEGIN { n = 0; i = 0 }
NR == FNR { want[n++] = $0; next }
i < n && $0 == want[i] { i++ }
END { if (i < n) print "#" i + 1 ": " want[i] }
