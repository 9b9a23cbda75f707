"""Swapping the embedding model without downtime: ``oracle-rag model switch|activate|rollback|drop``.

A switch registers a new model generation (engines/generations.py) in the
free vector slot and loads its model (Oracle: ``DBMS_VECTOR.LOAD_ONNX_MODEL``
under its own name; the embedded engine: its ONNX file in-process). From then
on every chunk write embeds with both models, and the worker fills the new
generation's vectors behind the queue (indexing/worker.py). Searches keep reading the
active generation until ``activate`` flips it, in one transaction, once the
new one covers every chunk and its vector index is built; the old one stays
live for ``rollback`` until ``drop``.

Every step is safe to kill and to run again: the registry row says where a
switch stands (LOADING: run ``switch`` again; STANDBY: filling or ready), the
stamps on each vector say which chunks are done, and the flip is one commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oracle_rag.config import Settings
from oracle_rag.embedding import catalog, ensure_model
from oracle_rag.embedding.model_cache import rebuild_hint
from oracle_rag.engines import Engine
from oracle_rag.engines import generation_sql as gq
from oracle_rag.engines.generations import ACTIVE, LOADING, SLOTS, STANDBY, Generation
from oracle_rag.errors import DatabaseError, EmbeddingError, InputError
from oracle_rag.indexing import provision


@dataclass(frozen=True)
class GenerationStatus:
    generation: Generation
    missing: int  # chunks without its vector
    chunks: int

    def as_dict(self) -> dict[str, Any]:
        g = self.generation
        return {
            "generation": g.generation_id,
            "model": g.model_name,
            "state": g.state,
            "slot": g.slot,
            "fingerprint": g.fingerprint,
            "chunks": self.chunks,
            "missing": self.missing,
            "activated_at": None if g.activated_at is None else str(g.activated_at),
        }


def statuses(engine: Engine) -> list[GenerationStatus]:
    """Every generation with how many chunks still lack its vector."""
    with engine.connect() as conn:
        total = engine.chunk_total(conn)
        return [
            GenerationStatus(g, engine.missing_vectors(conn, g) if g.state != LOADING else total, total)
            for g in engine.generations(conn)
        ]


def switch_progress(engine: Engine) -> dict[str, Any] | None:
    """The switch under way, for ``status``, ``/healthz`` and the page: None when there is none.

    ``done`` once the new generation covers every chunk (then ``model
    activate`` flips to it).
    """
    found = statuses(engine)
    active = next((s for s in found if s.generation.state == ACTIVE), None)
    target = next(
        (s for s in found if s.generation.state != ACTIVE and s.generation.activated_at is None), None
    )
    if target is None:
        return None
    g = target.generation
    return {
        "to": g.model_name,
        "generation": g.generation_id,
        "state": g.state,
        "from": None if active is None else active.generation.model_name,
        "embedded": target.chunks - target.missing,
        "chunks": target.chunks,
        "missing": target.missing,
        "done": g.state == STANDBY and target.missing == 0,
    }


def switch(engine: Engine, settings: Settings, name: str) -> str:
    """Start (or resume) a switch to model ``name``: register its generation, load its model."""
    spec = catalog.get(name)
    with engine.connect() as conn:
        gens = engine.generations(conn)
    gen = next((g for g in gens if g.model_name == spec.name), None)
    if gen is not None and gen.state != LOADING:
        if gen.state == ACTIVE:
            raise InputError(
                f"{spec.name} is the active model (generation {gen.generation_id}): nothing to switch"
            )
        raise InputError(
            f"{spec.name} is already generation {gen.generation_id} ({gen.state}); "
            f"`oracle-rag model activate` flips to it once it covers every chunk"
        )
    if gen is None:
        if spec.dim != 384:
            raise InputError(f"{spec.name} has {spec.dim} dimensions; the vector slots hold 384")
        free = [s for s in SLOTS if s not in {g.slot for g in gens}]
        if not free:
            kept = next(g for g in gens if g.state != ACTIVE)
            raise InputError(
                f"both vector slots are taken; drop the generation kept for rollback first: "
                f"`oracle-rag model drop {kept.model_name}`"
            )
        with engine.begin() as conn:
            conn.execute(
                engine.statement(gq.INSERT_GENERATION),
                {
                    "model_name": spec.name,
                    "db_model": spec.oracle_name,
                    "dimensions": spec.dim,
                    "slot": free[0],
                    "query_prefix": spec.query_prefix,
                    "passage_prefix": spec.passage_prefix,
                },
            )
            gen = next(g for g in engine.generations(conn) if g.model_name == spec.name)
    # No vector of this generation is stored yet: a cached file of an earlier build is rebuilt for it here
    # (a generation that has vectors keeps its file: ensure_model never replaces it for them).
    ensure_model(settings.data_path, model=spec, replace_stale=True)
    fingerprint = _load(engine, settings, gen)
    with engine.connect() as conn:
        dims = len(engine.embed_with(conn, gen, "oracle-rag generation check"))
    if dims != gen.dimensions:
        raise DatabaseError(f"{spec.name} embeds {dims} dimensions, not {gen.dimensions}: not switched")
    with engine.begin() as conn:
        conn.execute(
            engine.statement(gq.MARK_LOADED), {"generation_id": gen.generation_id, "fingerprint": fingerprint}
        )
        missing = engine.missing_vectors(conn, gen)
    return (
        f"generation {gen.generation_id}: {spec.name} in slot {gen.slot}; the worker embeds the "
        f"{missing} chunks it lacks behind the queue (progress: `oracle-rag status`), then run "
        f"`oracle-rag model activate`"
    )


def earlier_builds(engine: Engine, settings: Settings) -> list[str]:
    """One line per live generation whose model file here is of an earlier build than this version's.

    Its searches and writes keep using that file (its vectors came from it);
    the line says so and what to run to move to the new build.
    """
    with engine.connect() as conn:
        gens = engine.generations(conn)
    lines = []
    for gen in gens:
        try:
            spec = catalog.get(gen.model_name)
        except EmbeddingError:  # a model this process does not declare: nothing to compare with
            continue
        path = spec.path_in(settings.data_path)
        found = spec.stale_format(path) if path.is_file() else None
        if gen.state == LOADING or found is None:
            continue
        hint = rebuild_hint(spec.name, active=gen.state == ACTIVE)
        lines.append(
            f"{gen.label()} runs {path.name} of build {found} (this version builds {spec.build_format}) "
            f"and keeps it while its vectors come from it; {hint}"
        )
    return lines


def _load(engine: Engine, settings: Settings, gen: Generation) -> str | None:
    """Make ``gen``'s model runnable by the database; the fingerprint of its file."""
    spec = catalog.get(gen.model_name)
    if engine.loads_models:
        path = ensure_model(settings.data_path, model=spec)
        provision.load_model_file(engine, path, name=gen.db_model)
        return catalog.fingerprint(path)
    return engine.load_generation_model(gen)


def _find(gens: list[Generation], name: str) -> Generation | None:
    return next((g for g in gens if g.model_name.casefold() == str(name).casefold()), None)


def _target(gens: list[Generation], name: str | None) -> Generation:
    """The generation ``activate`` flips to: ``name``, or the one not active (two slots: at most one)."""
    if name is not None:
        found = _find(gens, name)
        if found is None:
            raise InputError(f"{name} is not a model generation here (see `oracle-rag model generations`)")
        return found
    waiting = [g for g in gens if g.state != ACTIVE]
    if not waiting:
        raise InputError(
            "no model generation is waiting to be activated; start one with "
            "`oracle-rag model switch --to NAME`"
        )
    return waiting[0]


def activate(engine: Engine, name: str | None = None) -> str:
    """Flip searches to the STANDBY generation (``name``), once it covers every chunk.

    Refused, saying how many chunks are missing, before that. Its vector
    index is built first; the flip itself is one transaction that re-checks
    the coverage, so a search reads either the old generation or the new one.
    """
    with engine.connect() as conn:
        target = _target(engine.generations(conn), name)
        if target.state == ACTIVE:
            return f"{target.label()} is already active"
        if target.state != STANDBY:
            raise InputError(
                f"{target.label()} is still loading: run `oracle-rag model switch --to "
                f"{target.model_name}` again"
            )
        _refuse_gaps(engine, conn, target)
    built = engine.build_vector_index(target)
    with engine.begin_exclusive() as conn:
        active = engine.active_generation(conn)
        _refuse_gaps(engine, conn, target)
        conn.execute(engine.statement(gq.MARK_STANDBY), {"generation_id": active.generation_id})
        stepped = conn.execute(
            engine.statement(gq.MARK_ACTIVE), {"generation_id": target.generation_id}
        ).rowcount
        if stepped != 1:
            raise DatabaseError(f"{target.label()} changed meanwhile; nothing flipped")
    return (
        f"active: {target.label()} ({built}); {active.label()} is kept and written for "
        f"`oracle-rag model rollback` until `oracle-rag model drop {active.model_name}`"
    )


def _refuse_gaps(engine: Engine, conn: Any, target: Generation) -> None:
    missing = engine.missing_vectors(conn, target)
    if missing:
        total = engine.chunk_total(conn)
        raise InputError(
            f"{target.label()} lacks vectors for {missing} of {total} chunks; the worker is "
            f"embedding them (see `oracle-rag status`): activate when none are missing"
        )


def rollback(engine: Engine) -> str:
    """Flip back to the generation that was active before (kept and written since)."""
    with engine.connect() as conn:
        gens = engine.generations(conn)
    previous = [g for g in gens if g.state == STANDBY and g.activated_at is not None]
    if not previous:
        raise InputError("no earlier generation is kept to roll back to")
    return activate(engine, previous[0].model_name).replace("active:", "rolled back; active:", 1)


def drop(engine: Engine, name: str) -> str:
    """Remove a generation that is not active: its registry row, then its index and (Oracle) model.

    The row goes first, in its own commit: from then on nothing writes or
    fills its slot, and vectors left there carry a stamp no generation has.
    A kill after it leaves at most a model and an index to remove, which a
    second ``drop`` does.
    """
    with engine.connect() as conn:
        gens = engine.generations(conn)
    gen = _find(gens, name)
    if gen is None:
        spec = catalog.get(name)
        if engine.loads_models and provision.model_present(engine, spec.oracle_name):
            provision.drop_model(engine, spec.oracle_name)
            return f"{spec.name} was not a generation; dropped its leftover model {spec.oracle_name}"
        return f"{spec.name} is not a model generation here: nothing to drop"
    if gen.state == ACTIVE:
        raise InputError(f"{gen.label()} is the active generation; activate another one first")
    with engine.begin() as conn:
        conn.execute(engine.statement(gq.DELETE_GENERATION), {"generation_id": gen.generation_id})
    engine.drop_vector_index(gen)
    if engine.loads_models and not any(g.db_model == gen.db_model for g in gens if g is not gen):
        provision.drop_model(engine, gen.db_model)
    return f"dropped {gen.label()}; slot {gen.slot} is free"
