"""Reading the configuration users already have: mm2.properties and MirrorMaker 1 flags."""
