"""The pure core: records, verdicts, roles and plans. No I/O, no clock, no globals."""
