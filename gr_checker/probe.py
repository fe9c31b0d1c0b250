"""One round trip per Group Replication member (rule R1): its view of the group, its own
queues, and its read-only flags (MySQL 8.0, 8.4 and 9.x)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checker_core.edges.question import Answer, Question
from gr_checker.policy import GrFacts, Member

PROBE_SQL = (
    "SELECT @@server_uuid, @@super_read_only, @@read_only, "
    "@@group_replication_single_primary_mode, @@group_replication_member_expel_timeout; "
    "SELECT MEMBER_ID, MEMBER_HOST, MEMBER_PORT, MEMBER_STATE, MEMBER_ROLE "
    "FROM performance_schema.replication_group_members; "
    "SELECT COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE, COUNT_TRANSACTIONS_IN_QUEUE, "
    "COUNT_TRANSACTIONS_REMOTE_APPLIED FROM performance_schema.replication_group_member_stats "
    "WHERE MEMBER_ID = @@server_uuid"
)


def _flag(value: object) -> bool:
    return str(value).strip().upper() in ("1", "ON", "TRUE")


def _count(value: object) -> int | None:
    return None if value is None else int(str(value))


class GrProbe(Question[GrFacts]):
    """The member's flags, its view of the group, and its own queues (three statements)."""

    def ask(self, conn: Any) -> tuple[str, Sequence[object]]:
        return PROBE_SQL, ()

    def read(self, conn: Any, answer: Answer) -> GrFacts:
        first = answer.rows(0)
        uuid, super_ro, ro, single, expel = first[0] if first else ("", 0, 0, 1, None)
        members = tuple(
            Member(
                str(mid or ""), str(host or ""), int(port or 0), str(state or ""), str(role or "")
            )
            for mid, host, port, state, role in answer.rows(1)
        )
        stats = answer.rows(2)
        applier, certify, applied = stats[0] if stats else (None, None, None)
        return GrFacts(
            server_uuid=str(uuid),
            super_read_only=_flag(super_ro),
            read_only=_flag(ro),
            single_primary=_flag(single),
            members=members,
            applier_queue=_count(applier),
            certify_queue=_count(certify),
            remote_applied=_count(applied),
            expel_timeout_s=_count(expel),
        )


probe = GrProbe()
