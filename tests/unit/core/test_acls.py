"""Which topic ACLs a flow copies: READ and DESCRIBE only, never WRITE; literal and prefixed; idempotent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.acls import PatternType, Permission, TopicAcl, plan_acls

L, P = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def prefixed(topic: str) -> str:
    return f"A.{topic}"


def acl(
    pattern: PatternType, name: str, operation: str, permission: Permission = ALLOW, who: str = "User:app"
) -> TopicAcl:
    return TopicAcl(pattern, name, who, "*", operation, permission)


def test_what_is_copied_and_what_is_not() -> None:
    source = [
        acl(L, "orders", "READ"),
        acl(L, "orders", "WRITE"),  # never: only the mirror writes to a copy
        acl(L, "orders", "ALL", who="User:admin"),  # READ (which grants DESCRIBE too)
        acl(L, "orders", "READ", DENY, who="User:intruder"),
        acl(L, "orders", "ALTER_CONFIGS"),  # not for readers
        acl(P, "pay", "DESCRIBE"),  # a prefix of a selected topic
        acl(P, "zzz", "READ"),  # a prefix of no selected topic
        acl(L, "secret", "READ"),  # a topic the flow does not select
    ]
    copies = plan_acls(source, [], ["orders", "payments"], prefixed)
    got = sorted(
        (c.target.pattern, c.target.name, c.target.principal, c.target.operation, c.target.permission) for c in copies
    )
    assert got == sorted(
        [
            (L, "A.orders", "User:app", "READ", ALLOW),
            (L, "A.orders", "User:admin", "READ", ALLOW),
            (L, "A.orders", "User:intruder", "READ", DENY),
            (P, "A.pay", "User:app", "DESCRIBE", ALLOW),
        ]
    )
    assert {c.source for c in copies if c.target.principal == "User:admin"} == {
        acl(L, "orders", "ALL", who="User:admin")
    }


operations = st.sampled_from(["ALL", "READ", "WRITE", "DESCRIBE", "CREATE", "ALTER", "IDEMPOTENT_WRITE"])
acls = st.builds(
    TopicAcl,
    st.sampled_from([L, P]),
    st.sampled_from(["o", "or", "orders", "pay", "x"]),
    st.sampled_from(["User:a", "User:b"]),
    st.just("*"),
    operations,
    st.sampled_from([ALLOW, DENY]),
)


@given(st.lists(acls, max_size=12), st.lists(st.sampled_from(["orders", "payments", "other"]), max_size=3))
def test_never_write_and_planning_again_after_applying_adds_nothing(source: list[TopicAcl], topics: list[str]) -> None:
    first = plan_acls(source, [], topics, prefixed)
    assert all(c.target.operation in ("READ", "DESCRIBE") for c in first)
    assert len({c.target for c in first}) == len(first)
    assert plan_acls(source, [c.target for c in first], topics, prefixed) == ()
