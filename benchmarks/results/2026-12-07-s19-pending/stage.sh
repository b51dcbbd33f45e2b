#!/usr/bin/env bash
# Stage the nineteenth session's pending GPU inputs into `.gpu/` (from the repository root, after
# `make run`): the seventeenth session's stage (at720, store720, J1, a_best, ...), then J2-J4 and
# round 5 (its 14 kernels without a judge time and its bests), and the calls O and P.
set -eu
cd "$(dirname "$0")/../../.."
HERE=benchmarks/results/2026-12-07-s19-pending
G=benchmarks/results
bash $G/2026-12-07-s17-pending/stage.sh
cp $G/2026-12-07-s18-gpu/callJ_J2_bench.json .gpu/J2.json
cp $G/2026-12-07-s19-gpu/J3a_bench.json .gpu/J3a.json
cp $G/2026-12-07-s19-gpu/J3b_bench.json .gpu/J3b.json
cp $G/2026-12-07-s19-gpu/J4_bench.json .gpu/J4.json
rm -rf .gpu/r5 && tar xzf $HERE/r5.tgz -C .gpu
cp $HERE/callO.sh $HERE/callP.sh .gpu/
# what callP does not need (the carry is 64 MiB with .whl)
rm -rf .gpu/states .gpu/r1 .gpu/r1ho .gpu/r2
du -sh .gpu .whl 2>/dev/null || true
