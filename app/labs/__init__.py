"""The labs, in sidebar order. Lab ids are used everywhere: CLI, snapshots, settings."""

from app.labs.hardware import HardwareLab
from app.labs.kv import KVLab
from app.labs.mcu import McuLab
from app.labs.memory import MemoryLab
from app.labs.roofline import RooflineLab

LAB_CLASSES = (HardwareLab, RooflineLab, MemoryLab, McuLab, KVLab)
LAB_IDS = tuple(cls.lab_id for cls in LAB_CLASSES)
