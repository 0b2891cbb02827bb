"""coopsim: cooperative multi-agent and embodied simulation.

One scenario engine (`coopsim.platform`), one communication layer (`coopsim.comm`) and one
safety-certificate layer (`coopsim.safety`), shared by every agent plugin (`coopsim.agents`).
"""
__version__ = "0.1.0"
