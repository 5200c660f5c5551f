"""How scripted/respells sends a write again (runner.models._policies.respelled): the
schema's defaults, numbers as strings, optional properties as empty values (Z5), or an SQL
statement respelled (Z2). A spec names one as the model parameter `respell`."""

from __future__ import annotations

from typing import Literal

Respelling = Literal[
    "defaults", "strings", "empties", "sql-numbers", "sql-columns", "sql-case", "sql-request-id"
]
