"""What keeps a run safe and visible, used by every stage.

`progress` prints stage lines and rates; `stages` times each stage and records its peak
memory; `faults` names the pause points of the kill-and-resume tests; `lock` keeps one run
per output folder; `outdir` decides what a run may write or remove before it writes anything;
`guards` refuses runs that cannot finish (disk, memory) and turns disk errors into one clear
message; `resume` owns the completion records an interrupted run leaves behind; `heap`
keeps the C heap's memory for reuse during iterative phases; `signals` turns Ctrl-C and a
scheduler's SIGTERM into a clean stop; `exits` is how a command ends on every rank (a user
error printed once and exit 2, a stop, a bug aborting the job), for `cli` and `dgltools`. These sit
below the pipeline's steps because the steps call them, never the other way round.
"""
__all__ = ["progress", "stages", "faults", "lock", "outdir", "guards", "resume", "heap", "signals", "exits"]
