"""Import of a MirrorMaker 2 dedicated-mode properties file as a drkit config (``drkit config import-mm2``).

Modules, one idea each: :mod:`~drkit.config.mm2.model` (what an import is made of: the properties, what
became of each, the reasons as a StrEnum), :mod:`~drkit.config.mm2.catalogue` (MM2's property names and
defaults), :mod:`~drkit.config.mm2.clients` (Java client properties to librdkafka's, secrets to
``${env:...}``), :mod:`~drkit.config.mm2.mapping` (the pure mapping) and :mod:`~drkit.config.mm2.files`
(reading the file as Java does; the TOML, validated before anyone sees it).
"""

from drkit.config.mm2.files import generated_toml, parse_mm2_properties, read_mm2_properties, render_toml
from drkit.config.mm2.mapping import map_mm2
from drkit.config.mm2.model import Carried, Dropped, DropReason, EnvSecret, Mm2Mapping, Mm2Properties

__all__ = [
    "Carried",
    "DropReason",
    "Dropped",
    "EnvSecret",
    "Mm2Mapping",
    "Mm2Properties",
    "generated_toml",
    "map_mm2",
    "parse_mm2_properties",
    "read_mm2_properties",
    "render_toml",
]
