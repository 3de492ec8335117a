#!/bin/bash
# One scenc shard per Slurm array task: sbatch --array=1-4 docs/shards/slurm-array.sh
# Then, once every task is done: scenc merge results/loop-shard*.json -o results/loop.json
#SBATCH --job-name=scenc-loop
#SBATCH --array=1-4
#SBATCH --cpus-per-task=4
#SBATCH --exclusive
#SBATCH --time=02:00:00
#SBATCH --output=results/loop-shard%a.log
set -euo pipefail
N=4  # must match --array=1-N
# The same options (and the same --seed) in every task: they make the plan, and
# `scenc merge` refuses shards of different plans.
# If the task is requeued after a node failure, go on from what the file holds.
OUT=results/loop-shard${SLURM_ARRAY_TASK_ID}.json
if [ -e "$OUT" ]; then
    exec scenc run --resume "$OUT" -q
fi
exec scenc run examples/loop.scn --param threads=1,2,4 --param maxsize=64,1024 \
    --runs 30 --seed 1 --shard "${SLURM_ARRAY_TASK_ID}/${N}" -o "$OUT" -q
