"""Shared up-front checks of the MG-MAPF research scripts' flags (immp_cs_pibt_sweep, immp_highlevel_sweep,
immp_intent_accuracy): bad input stops a script before its first episode."""
from __future__ import annotations

from coopsim.errors import ConfigError
from coopsim.platform import registry


def check_maps(maps, agents: int, goals: int) -> None:
    """Build each map's instance once (milliseconds), so a ``--map`` that does not exist or ``--agents`` /
    ``--goals`` that a map cannot take (more agents than its scen files' rows) stop the script before the first
    episode, not after the maps before it.

    Raises:
        ConfigError: key the flag (``--agents``, ``--goals``, ``--map``); names the map.
    """
    flags = {"num_agents": "--agents", "num_goals": "--goals", "map": "--map"}
    for mp in maps:
        try:
            core = registry.make_scenario("mapf/MGMAPF-v0", 1, map=mp, num_agents=agents, num_goals=goals,
                                          obs_radius=3)
        except ConfigError as exc:
            raise ConfigError(f"map {mp}: {exc.message}", key=flags.get(exc.key, exc.key), value=exc.value) from None
        core.close()
