package main

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Lists: page size and cursors, shared by every list endpoint.

const (
	defaultLimit = 25
	maxLimit     = 100
)

// page is where a list page starts and how long it is.
type page struct {
	limit   int
	afterID int64
}

// parsePage reads limit (1 to 100, default 25) and cursor (opaque; made by appendPagination).
func parsePage(q url.Values) (page, *apiError) {
	p := page{limit: defaultLimit}
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > maxLimit {
			return p, badRequest("invalid_parameter", fmt.Sprintf("limit must be an integer from 1 to %d; got %q.", maxLimit, s[0]))
		}
		p.limit = n
	}
	if s, ok := q["cursor"]; ok {
		id, ok := decodeCursor(s[0])
		if !ok {
			return p, badRequest("invalid_parameter", "cursor is not a cursor this server made; use pagination.nextCursor as it is.")
		}
		p.afterID = id
	}
	return p, nil
}

// A cursor is the base64url text "id:N": after the object with id N.
func encodeCursor(afterID int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("id:" + strconv.FormatInt(afterID, 10)))
}

func decodeCursor(s string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), "id:")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != rest {
		return 0, false
	}
	return id, true
}

// appendPagination appends the "pagination" member of a list answer; lastID is the id of the page's
// last object.
func appendPagination(b []byte, limit int, hasMore bool, lastID int64) []byte {
	b = append(b, `"pagination":{"limit":`...)
	b = strconv.AppendInt(b, int64(limit), 10)
	b = append(b, `,"hasMore":`...)
	b = strconv.AppendBool(b, hasMore)
	b = append(b, `,"nextCursor":`...)
	if !hasMore {
		b = append(b, "null"...)
	} else {
		b = appendString(b, encodeCursor(lastID))
	}
	return append(b, '}')
}

// appendCount appends the body of a /count answer.
func appendCount(b []byte, n int64) []byte {
	b = append(b, `{"count":`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, "}\n"...)
}
