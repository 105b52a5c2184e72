package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// MaxReplyBytes bounds the body of a stored reply (sync mode): a larger
// 2xx answer is a delivery like any other, but nobody is answered with it.
const MaxReplyBytes = 64 << 10

// MaxReplyContentTypeBytes bounds a stored reply's Content-Type, as
// stored (escaped): like the body, it is the backend's to choose, and is
// served to the sender and to every duplicate.
const MaxReplyContentTypeBytes = 256

// ErrReplyNotStorable: the reply's Content-Type is longer than
// MaxReplyContentTypeBytes; nobody is answered with it.
var ErrReplyNotStorable = errors.New("the reply's Content-Type is longer than 256 bytes")

// Storable returns r as the stores keep it, its Content-Type escaped
// (escapeHeaderText), or ErrReplyNotStorable. SaveReply applies it; a
// caller that answers with r before reading it back applies it too, so
// that the first sender gets what its duplicates will.
func (r Reply) Storable() (Reply, error) {
	if len(r.ContentType) > MaxReplyContentTypeBytes {
		return r, ErrReplyNotStorable
	}
	r.ContentType = escapeHeaderText(r.ContentType)
	if len(r.ContentType) > MaxReplyContentTypeBytes {
		return r, ErrReplyNotStorable
	}
	return r, nil
}

// escapeHeaderText makes a header value storable as text and servable as
// a header again: every byte that is not part of valid UTF-8 text, and
// every control character but a tab, is written as \xNN.
func escapeHeaderText(s string) string {
	clean := true
	for _, c := range s {
		if c == utf8.RuneError || (c < 0x20 && c != '\t') || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		if (c == utf8.RuneError && n <= 1) || (c < 0x20 && c != '\t') || c == 0x7f {
			fmt.Fprintf(&b, `\x%02x`, s[i])
			i++
			continue
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	return b.String()
}

// Reply is a backend's 2xx answer to a delivery of a sync-mode event,
// stored with the event: what its sender was answered, and what every
// later duplicate of it is answered.
type Reply struct {
	Status      int
	ContentType string
	Body        []byte
	// StoredAt is when it was stored (zero before).
	StoredAt time.Time
}

// ReplyView is a stored reply as the API and the inspector show it: the
// body cut to an excerpt (MaxExcerptBytes, valid UTF-8).
type ReplyView struct {
	Status      int       `json:"status"`
	ContentType string    `json:"content_type"`
	BodyExcerpt string    `json:"body_excerpt"`
	BodyBytes   int       `json:"body_bytes"`
	StoredAt    time.Time `json:"stored_at"`
}

func (r *Reply) view() *ReplyView {
	if r == nil {
		return nil
	}
	return &ReplyView{
		Status: r.Status, ContentType: r.ContentType, BodyBytes: len(r.Body), StoredAt: r.StoredAt,
		BodyExcerpt: storableText(string(r.Body), MaxExcerptBytes),
	}
}

// SaveReply stores r as the reply of event id, leased under token, unless
// the event already has one: the first stored reply is the one every
// duplicate gets, whatever later deliveries (a replay) answer. It reports
// whether r was stored. The commit is durable, like an append's: the
// sender may be answered with r as soon as this returns.
func (p *Postgres) SaveReply(ctx context.Context, id int64, token uuid.UUID, r Reply) (bool, error) {
	r, err := r.Storable()
	if err != nil {
		return false, err
	}
	tag, err := p.pool.Exec(ctx, sqlSaveReply, id, pgUUID(token), r.Status, r.ContentType, nonNil(r.Body))
	if err != nil {
		return false, fmt.Errorf("save reply of event %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// StoredReply returns the stored reply of event id, nil when it has none.
func (p *Postgres) StoredReply(ctx context.Context, id int64) (*Reply, error) {
	var (
		status *int
		ct     *string
		body   []byte
		at     *time.Time
	)
	err := p.pool.QueryRow(ctx, sqlStoredReply, id).Scan(&status, &ct, &body, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read reply of event %d: %w", id, err)
	}
	if status == nil {
		return nil, nil
	}
	r := &Reply{Status: *status, Body: nonNil(body)}
	if ct != nil {
		r.ContentType = *ct
	}
	if at != nil {
		r.StoredAt = *at
	}
	return r, nil
}

// SaveReply: see Postgres.SaveReply.
func (s *SQLite) SaveReply(ctx context.Context, id int64, token uuid.UUID, r Reply) (bool, error) {
	r, err := r.Storable()
	if err != nil {
		return false, err
	}
	var n int64
	err = s.write(ctx, func(tx sqliteTx) error {
		res, err := tx.ExecContext(ctx, sqliteSaveReply, r.Status, r.ContentType, nonNil(r.Body), s.now().UnixNano(), id, token[:])
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("save reply of event %d: %w", id, err)
	}
	return n == 1, nil
}

// StoredReply: see Postgres.StoredReply.
func (s *SQLite) StoredReply(ctx context.Context, id int64) (*Reply, error) {
	var (
		status sql.NullInt64
		ct     sql.NullString
		body   []byte
		at     sql.NullInt64
	)
	err := s.r.QueryRowContext(ctx, sqliteStoredReply, id).Scan(&status, &ct, &body, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read reply of event %d: %w", id, err)
	}
	if !status.Valid {
		return nil, nil
	}
	r := &Reply{Status: int(status.Int64), ContentType: ct.String, Body: nonNil(body)}
	if at.Valid {
		r.StoredAt = time.Unix(0, at.Int64).UTC()
	}
	return r, nil
}

// sqlSaveReply stores a reply, fenced by the lease (a worker whose lease
// was taken over stores nothing), first reply only.
const sqlSaveReply = `
UPDATE whguard_events SET reply_status = $3, reply_content_type = $4, reply_body = $5, reply_at = now()
WHERE id = $1 AND lease_token = $2 AND reply_status IS NULL`

const sqlStoredReply = `
SELECT reply_status, reply_content_type, reply_body, reply_at FROM whguard_events WHERE id = $1`

const sqliteSaveReply = `
UPDATE whguard_events SET reply_status = ?, reply_content_type = ?, reply_body = ?, reply_at = ?
WHERE id = ? AND lease_token = ? AND reply_status IS NULL`

const sqliteStoredReply = `
SELECT reply_status, reply_content_type, reply_body, reply_at FROM whguard_events WHERE id = ?`
