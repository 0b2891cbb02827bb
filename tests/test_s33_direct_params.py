"""Components built directly in Python refuse bad params as the registry does (ConfigError naming key and value),
not with a raw pydantic ValidationError (session 33; was fixed for SMACCore alone)."""
import pytest

from coopsim.comm.bandwidth import BandwidthChannel
from coopsim.errors import ConfigError
from coopsim.scenarios.coop_game.core import CoopGameCore
from coopsim.scenarios.line import LineWalkCore
from coopsim.scenarios.mapf.core import MGMAPFCore
from coopsim.scenarios.mpe import SimpleSpreadCore
from coopsim.platform.registry import make_component, make_scenario


@pytest.mark.parametrize("build, key, needle", [
    (lambda: MGMAPFCore(num_envs=1, num_agents=True), "num_agents", "not a boolean"),
    (lambda: LineWalkCore(num_envs=1, bogus=3), "bogus", "valid parameters: cell_size_m, length, max_steps, num_agents"),
    (lambda: CoopGameCore(num_envs=1, size=4), "size", "unknown parameter 'size'"),
    (lambda: SimpleSpreadCore(num_envs=1, num_agents=0), "num_agents", "0"),
    (lambda: BandwidthChannel(queue_packets=True), "queue_packets", "not a boolean"),
])
def test_direct_construction_refuses_bad_params_with_a_config_error(build, key, needle):
    with pytest.raises(ConfigError) as e:
        build()
    assert e.value.key == key and needle in str(e.value)


def test_direct_construction_says_what_the_registry_says():
    with pytest.raises(ConfigError) as direct:
        LineWalkCore(num_envs=1, length=True)
    with pytest.raises(ConfigError) as reg:
        make_scenario("line/LineWalk-v0", num_envs=1, length=True)
    assert direct.value.key == reg.value.key == "length"
    assert str(direct.value).split("invalid value", 1)[-1] == str(reg.value).split("invalid value", 1)[-1]


def test_direct_construction_with_good_params_is_unchanged():
    ch = BandwidthChannel(queue_packets=8)
    assert ch.params.queue_packets == 8 and ch.params == make_component("channel", "bandwidth-v0", queue_packets=8).params
