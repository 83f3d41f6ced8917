"""One public function per everyday job, for notebooks and scripts, below the command line (``bench.cli``
parses, calls these, renders). The command line imports nothing of bench but this package.

Services:

- :func:`plan_run`, :func:`run_suite`: a suite checked against a store (what would run), then run, with
  callbacks for progress; the result's :meth:`SuiteRun.frame` is one row per cell run. :func:`status`:
  where each of its cells stands. :func:`oneline_suite`, :func:`write_oneline_suite`: the suite of a
  one-line run (``bench run --env ID --algo NAME``), checked, then written beside the store.
- :func:`plan_tune`, :func:`tune`, :func:`export_best`: tuning studies checked, run (resuming), and their
  best configurations written as a suite.
- :func:`report`: a suite's (or a store's) self-contained HTML report.
- :func:`race`: candidate labels raced rung by rung on one env, the runs that go on continuing from their
  checkpoints (``bench race``); :func:`race_file` a suite file's ``race:`` block (``bench race SUITE.yaml``);
  :func:`race_answer_lines` its answer in words.
- :func:`recommend`: which algorithm for a problem, from a store or the shipped reference (whose answers are
  computed once per pack content).
- :func:`runs`, :func:`episodes`, :func:`evaluations`, :func:`diagnostics`: a store's tables as pandas frames;
  :func:`scores`: the normalised per-run scores the report compares, as a frame.
- :func:`export`: runs, episodes, evaluations or diagnostics as tables, normalised scores for rliable, or a suite as a
  pack; :func:`import_packs` loads packs into a store. :func:`export_scores`, :func:`pack_suite`: the parts.
- :func:`parity`: are two labels the same algorithm, per env.
- :func:`load_policy`: a run's saved policy, ready to act (``pi.act(obs)``); :func:`evaluate`: N episodes
  of a loaded policy on a fresh evaluation env, optionally filmed to an MP4.
- :func:`speed`: own implementation against SB3, side by side; :func:`envs`: the envs bench knows;
  :func:`suite_schema`: the suite file's JSON Schema.

Helpers: :func:`results_store` (the store a reading command answers from: yours, or the shipped
reference), :func:`reference` (the shipped reference, verified), :func:`record_env_facts` (what a store
records of each env at run time), :func:`resolved_hyperparams` (each label's resolved hyperparameters and
where each value came from), :func:`writable` (whether an output path can be written).

Nothing here prints: messages go to a ``log`` callable the caller passes. A user's error is
:class:`BadInput` (one line per problem; the command line prints them and exits with status 2). A store
that cannot be used is :class:`StoreError`, a pack that fails its check :class:`PackError`.
"""

from __future__ import annotations

from bench.api._common import (REFERENCE_DIR, BadInput, Reference, cache_dir, reference, reference_dir,
                               results_store, writable)
from bench.api._frames import SCORE_FRAME_COLUMNS, diagnostics, episodes, evaluations, runs, scores
from bench.api._oneline import ONELINE_IMPLS, OneLineSuite, oneline_choices, oneline_suite, write_oneline_suite
from bench.api._race import DEFAULT_RUNGS as RACE_RUNGS
from bench.api._race import DEFAULT_SEEDS as RACE_SEEDS
from bench.api._race import RaceResult, RungReport, race, race_answer_lines, race_file, race_fraction
from bench.api._recommend import Answer, recommend
from bench.api._results import (EXPORT_FORMATS, EXPORT_WHAT, NothingToExport, ParityResult, export,
                                export_scores, import_packs, pack_suite, parity, report)
from bench.api._run import (HyperparamRow, RunPlan, SuiteRun, contended_keys, hyperparams_lines, plan_run,
                            record_env_facts, resolved_hyperparams, run_outputs, run_suite)
from bench.api._status import STATES, CellStatus, GroupStatus, SuiteStatus, status
from bench.api._tools import SPEED_ALGOS, SPEED_KERNELS, envs, speed, suite_schema
from bench.api._tune import IMPLS, TUNE_ALGOS, TunePlan, export_best, plan_tune, tune
from bench.run.policies import Evaluation, LoadedPolicy, PolicyError, evaluate, load_policy, video_missing
# The vocabulary a caller (the command line) reads results and errors in.
from bench.run.progress import duration, progress_line
from bench.run.speed import median_steps
from bench.storage.packed import PackError
from bench.storage.schema import StoreError
from bench.storage.urls import disk_full
from bench.storage.urls import DEFAULT_URL, StoreURL, check_url, describe_url, redact, url_secret
from bench.envs.traits import ACTIONS, OBS, PRIORITIES, REWARDS

__all__ = [
    "ACTIONS", "DEFAULT_URL", "EXPORT_FORMATS", "EXPORT_WHAT", "IMPLS", "OBS", "ONELINE_IMPLS", "PRIORITIES",
    "REFERENCE_DIR", "REWARDS", "SCORE_FRAME_COLUMNS", "SPEED_ALGOS", "SPEED_KERNELS", "STATES", "TUNE_ALGOS",
    "Answer", "BadInput", "CellStatus", "Evaluation", "GroupStatus", "HyperparamRow", "LoadedPolicy",
    "NothingToExport", "OneLineSuite", "PackError", "ParityResult", "PolicyError", "RACE_RUNGS", "RACE_SEEDS",
    "RaceResult", "Reference", "RunPlan", "RungReport",
    "StoreError", "StoreURL", "SuiteRun", "SuiteStatus", "TunePlan",
    "cache_dir", "check_url", "contended_keys", "describe_url", "diagnostics", "duration", "envs", "episodes",
    "evaluate", "evaluations", "export", "export_best", "export_scores", "hyperparams_lines", "import_packs",
    "load_policy", "median_steps", "oneline_choices", "oneline_suite", "pack_suite", "parity", "plan_run",
    "plan_tune", "progress_line", "race", "race_answer_lines", "race_file", "race_fraction", "recommend", "record_env_facts", "redact", "reference", "reference_dir", "report",
    "resolved_hyperparams", "results_store", "run_outputs", "run_suite", "runs", "scores", "speed", "status",
    "suite_schema", "tune", "url_secret", "video_missing", "writable", "write_oneline_suite",
]
