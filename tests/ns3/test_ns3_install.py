"""Without ns-3 the channel says how to install it; params are validated with the valid values."""
from __future__ import annotations

import pytest
from coopsim.errors import ConfigError

from coopsim.comm.ns3 import build as ns3_build
from coopsim.comm.ns3.channel import Ns3Channel
from coopsim.errors import DependencyNotInstalled
from coopsim.platform import registry
from ns3_helpers import Positions


def test_absent_ns3_gives_install_instructions(monkeypatch, tmp_path):
    monkeypatch.setenv("COOPSIM_NS3_BUILD_DIR", str(tmp_path / "empty-build"))
    monkeypatch.setattr(ns3_build, "find_ns3_config", lambda: None)
    ch = Ns3Channel()
    with pytest.raises(DependencyNotInstalled) as info:
        ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1, scenario=Positions([[[0, 0, 0], [1, 0, 0]]]))
    msg = str(info.value)
    assert "ns-3 development files" in msg
    assert "apt-get install -y libns3-dev" in msg
    assert ".ci/install-ns3.sh" in msg and "docs/ns3.md" in msg
    assert not (tmp_path / "empty-build").exists()  # nothing built, nothing started


def test_registered_and_params_validated():
    ch = registry.make_component("channel", "ns3-v0", standard="802.11g", data_mode="ErpOfdmRate54Mbps")
    assert isinstance(ch, Ns3Channel) and ch.params.standard == "802.11g"
    with pytest.raises(ConfigError, match="'HtMcs7' is not a mode of 802.11a; valid: OfdmRate6Mbps, OfdmRate9Mbps, "
                                              "OfdmRate12Mbps, .*, OfdmRate54Mbps \\(ns-3 WifiMode"):
        Ns3Channel(data_mode="HtMcs7")
    for std, mode in (("802.11b", "DsssRate5_5Mbps"), ("802.11g", "DsssRate11Mbps"), ("802.11n", "HtMcs7")):
        assert Ns3Channel(standard=std, data_mode=mode).params.data_mode == mode
    with pytest.raises(ConfigError, match="greater than or equal to 28"):
        Ns3Channel(header_bytes=8)
    with pytest.raises(ConfigError, match="t ascending"):
        Ns3Channel(background_schedule=[[1.0, 1e6]])
    with pytest.raises(ConfigError, match="unknown parameter 'bogus'"):
        Ns3Channel(bogus=1)


def test_docs_example_runs(ns3_bridge):
    """The Python block of docs/ns3.md runs as written (docs examples are tests)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "ns3.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/ns3.md", "exec"), {})


def test_shipped_ns3_configs_validate(tmp_path):
    from pathlib import Path

    from coopsim.agents.comm_baselines.team import SENDERS
    from coopsim.comm.ns3.experiment import load

    paths = sorted((Path(__file__).resolve().parents[2] / "configs" / "ns3").glob("*.yaml"))
    assert paths
    for path in paths:
        cfg = load(str(path))
        params = Ns3Channel(**cfg["channel"]["params"]).params
        assert params.background_schedule is None or params.background_schedule[0][0] == 0
        assert set(cfg["senders"]) <= set(SENDERS) | {"ddacom"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("channel: {id: ideal-v0}\nsenders: [ddacom]\n")
    with pytest.raises(ConfigError, match="bad.yaml: key 'channel.id': channel.id must be ns3-v0"):
        load(str(bad))


def test_bridge_that_cannot_load_ns3_libraries_says_how_to_install(monkeypatch, tmp_path):
    """A bridge built before ns-3 was removed dies like the dynamic loader makes it die."""
    from coopsim.comm.ns3 import channel as ns3_channel

    fake = tmp_path / "coopsim-ns3-bridge"
    fake.write_text("#!/bin/sh\necho 'coopsim-ns3-bridge: error while loading shared libraries: "
                    "libns3.37-wifi.so: cannot open shared object file' >&2\nexit 127\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ns3_channel, "ensure_bridge", lambda: fake)
    ch = Ns3Channel()
    with pytest.raises(DependencyNotInstalled, match=r"(?s)libns3.37-wifi.so.*install-ns3.sh"):
        ch.reset(0, num_envs=1, num_agents=2, dt_s=0.1, scenario=Positions([[[0, 0, 0], [1, 0, 0]]]))
    ch.close()
