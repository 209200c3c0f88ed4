"""What a pasted launch line says about the training: ``horovodrun -np 16 -H a:8,b:8 python train.py``
is Horovod with 16 processes. An observed fact, as what code shows: a declared profile still wins."""

from __future__ import annotations

from mgpu_doctor.model.pasted import PastedFacts
from mgpu_doctor.model.training import TrainingProfile
from mgpu_doctor.record import replace


def with_launches(profile: TrainingProfile, pasted: PastedFacts) -> TrainingProfile:
    """The profile with the first launch's strategy and process count, where nothing observed says
    them yet. ``horovodrun`` is Horovod; ``mpirun``/``mpiexec`` only where the text also names
    Horovod (a Horovod version, or horovod on the command line): MPI launches other programs too."""
    horovod_named = "horovod" in pasted.versions
    launch = next((la for la in pasted.launches
                   if la.tool == "horovodrun" or horovod_named or "horovod" in la.text.lower()), None)
    if launch is None:
        return profile
    source = f"pasted text line {launch.line}: {launch.tool}"
    observed, sources = profile.observed, dict(profile.observed_from)
    if observed.strategy is None:
        observed = replace(observed, strategy="horovod")
        sources["strategy"] = source
    if observed.workers is None and launch.processes > 1:
        observed = replace(observed, workers=launch.processes)
        sources["workers"] = f"{source} -np {launch.processes}"
    return replace(profile, observed=observed, observed_from=sources)
