"""Export: each study's best trial as one suite file that ``bench run`` accepts."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.tune.targets import BadInput, Target

if TYPE_CHECKING:  # annotations only
    from bench.storage.urls import StoreURL


#: What an exported suite is a variant of (its ``variant:``), and what its labels end with: the tuned
#: runs sit beside the zoo-default runs of the same algorithms in one store, and must neither pool
#: with them under one label nor count in the answers by algorithm (bench.analysis.scoring.load).
VARIANT = "tuned"
LABEL_SUFFIX = "-tuned"


def check_exportable(targets: list[Target]) -> None:
    """Refuse, before any tuning, targets whose exported label would be too long for a suite.

    :raises BadInput: a label within ``len(LABEL_SUFFIX)`` characters of the suite limit.
    """
    from bench.suites.suite import MAX_LABEL

    for t in targets:
        if len(t.label) + len(LABEL_SUFFIX) > MAX_LABEL:
            raise BadInput(f"--export: label {t.label[:40]!r}... ({len(t.label)} characters) would export as "
                           f"'<label>{LABEL_SUFFIX}', longer than a suite allows; allowed: labels of at most "
                           f"{MAX_LABEL - len(LABEL_SUFFIX)} characters")


def export_suite(targets: list[Target], store_url: StoreURL, path: Path, *, name: str | None = None,
                 seeds: int | None = None) -> dict[str, Any]:
    """Write the best trial of each target's study as one suite file; returns the suite dict.

    The seeds are *fresh*: ``seeds`` of them (default: as many as were used for
    tuning), numbered after the largest tuning seed. The best trial was picked on
    the tuning seeds, so its score there is optimistically biased; a run on new
    seeds is an honest check that the configuration reproduces its tuned
    objective within the seed spread. Hyperparameters are the algorithm's fixed
    ones plus the best trial's readable values; ``bench run`` resolves them over
    the same zoo layer. Every label gets :data:`LABEL_SUFFIX` and the suite
    ``variant:`` :data:`VARIANT` ("tuned, equal budget" beside "zoo defaults").
    """
    import optuna
    import yaml

    from bench.envs.registry import parse_env_key
    check_exportable(targets)
    storage = optuna.storages.RDBStorage(store_url.text, skip_compatibility_check=True)  # Optuna's storage, its word
    header = ["Exported by `bench tune` on " + datetime.now(timezone.utc).isoformat(timespec="seconds"),
              f"from the studies in {store_url.shown}:"]
    envs: dict[str, dict[str, Any]] = {}
    algos: dict[str, dict[str, Any]] = {}
    tuning_seeds: set[int] = set()
    for t in targets:
        study = optuna.load_study(study_name=t.study, storage=storage)
        complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if not complete:
            raise BadInput(f"--export: study {t.study!r} has no completed trial yet; nothing to export")
        best = study.best_trial
        scores = best.user_attrs.get("seed_scores", [])
        header.append(
            f"  {t.label} on {t.env_id}: study {t.study!r}, trial {best.number}, {t.objective} = {best.value:.6g} "
            f"(mean over tuning seeds {list(t.seeds)}; per seed {', '.join(f'{s:.6g}' for s in scores)})"
        )
        if t.objective == "auc":
            header.append("    auc: the report's normalised AUC over the budget (0 = random policy, 1 = threshold)")
        tuning_seeds |= set(t.seeds)
        module, gym_id, kwargs = parse_env_key(t.env_id)
        envs.setdefault(t.env_id, {"id": f"{module}:{gym_id}" if module else gym_id, **({"kwargs": kwargs} if kwargs else {}),
                                   "threshold": t.threshold, "timesteps": t.timesteps, "window": t.window})
        entry = algos.setdefault(t.label, {"algo": t.algo, "impl": t.impl, **({"entry": t.entry} if t.entry else {}),
                                           "label": t.label + LABEL_SUFFIX, "env_hyperparams": {}})
        entry["env_hyperparams"][t.env_id] = dict(best.user_attrs["hyperparams"])
    n = seeds or max(len(t.seeds) for t in targets)
    first = max(tuning_seeds) + 1
    header.append(f"Seeds {first}..{first + n - 1} are fresh: the tuning seeds were {sorted(tuning_seeds)}.")
    for entry in algos.values():
        hp = entry.pop("env_hyperparams")
        # One env: plain hyperparams read best; several: one block per env.
        if len(hp) == 1:
            entry["hyperparams"] = next(iter(hp.values()))
        else:
            entry["hyperparams"] = {}
            entry["env_hyperparams"] = hp
    base = name or (targets[0].suite or targets[0].study)
    suite_name = "tuned-" + "".join(c if c.isalnum() or c in "_.-" else "_" for c in base)
    suite = {
        "name": suite_name[:64],
        "description": f"Best configurations of `bench tune` ({', '.join(t.study for t in targets)})",
        "variant": VARIANT,
        "seeds": list(range(first, first + n)),
        "envs": list(envs.values()),
        "algorithms": list(algos.values()),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"# {line}\n" for line in header) + yaml.safe_dump(suite, sort_keys=False, default_flow_style=None)
    path.write_text(text)
    return suite


