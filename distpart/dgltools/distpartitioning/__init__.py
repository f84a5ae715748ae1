"""DGL's tools/distpartitioning: scripts run by path. `data_proc_pipeline.py` (Step 2 on one
machine, backed by `distpart dispatch`) and GraphStorm's ParMETIS steps `parmetis_preprocess.py`
and `parmetis_postprocess.py` (with `../pm_dglpart`). Not imported by distpart."""
