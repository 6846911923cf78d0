"""The id path parameters of the control API: an id or a unique prefix of one.

Every route that takes an entry or episode id in its path declares it with `EntryId` or
`EpisodeId`, so the OpenAPI document states the same rule everywhere; the store resolves it
(`Grimoire.resolve_id`, `EpisodeLog.resolve_id`, rules in daemon/grimoire/short_ids.py) in the
same read or write that uses it, and the route answers with the full id.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from daemon.grimoire.short_ids import ID_LENGTH, ID_OR_PREFIX_PATTERN, MIN_PREFIX

__all__ = ["ID_RULE", "EntryId", "EpisodeId"]

ID_RULE = (f"the full id ({ID_LENGTH} hex characters) or a unique prefix of at least {MIN_PREFIX}: "
           f"404 when nothing matches, 400 when the prefix is ambiguous (the error names candidates) "
           f"or shorter than {MIN_PREFIX}")

# The pattern is stated, not validated by FastAPI: the store's answer (a 400 saying how many
# characters, a 404) says more than a 422 would.
_STATED = {"pattern": ID_OR_PREFIX_PATTERN}
EntryId = Annotated[str, Path(description=f"The entry: {ID_RULE}.", json_schema_extra=_STATED)]
EpisodeId = Annotated[str, Path(description=f"The episode: {ID_RULE}.", json_schema_extra=_STATED)]
