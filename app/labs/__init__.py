"""The labs, in sidebar order. Lab ids are used everywhere: CLI, snapshots, settings."""

from inferlab.app.labs.hardware import HardwareLab
from inferlab.app.labs.kv import KVLab
from inferlab.app.labs.mcu import McuLab
from inferlab.app.labs.memory import MemoryLab
from inferlab.app.labs.roofline import RooflineLab

LAB_CLASSES = (HardwareLab, RooflineLab, MemoryLab, McuLab, KVLab)
LAB_IDS = tuple(cls.lab_id for cls in LAB_CLASSES)
