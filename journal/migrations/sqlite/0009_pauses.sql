-- 0009: see the PostgreSQL migration of the same number.
CREATE TABLE whguard_pauses (
    kind   TEXT    NOT NULL CHECK (kind IN ('backend', 'provider')),
    name   TEXT    NOT NULL,
    reason TEXT    NOT NULL DEFAULT '',
    since  INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
);
