"""The GPU check (`scripts/gpu_check.sh`, docs/gpu.md): the wheel set a GPU host lacks, the
local stack with a GPU runner, the harness's GPU figures, and the table of what held."""
