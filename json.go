package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// Hand-written JSON output, and writeJSON, which sends it. Every response body is appended into a
// []byte with these helpers, in a fixed key order and without reflection.

const hexDigits = "0123456789abcdef"

// jsonSafe[b] is true for the ASCII bytes json.Marshal copies as they are: printable ASCII other than
// '"', '\\' and, because json.Marshal escapes HTML by default, '<', '>' and '&'.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// appendString appends s as a JSON string, exactly as json.Marshal would write it: '"' and '\\'
// escaped, \b \f \n \r \t in short form, other control bytes and <, >, & as \u00XX, U+2028 and U+2029
// escaped, and each byte of invalid UTF-8 replaced by \ufffd (FuzzAppendString holds it to that). It
// does not allocate beyond growing dst.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf && jsonSafe[b] {
			i++
			continue
		}
		c, size := rune(s[i]), 1
		if c >= utf8.RuneSelf {
			c, size = utf8.DecodeRuneInString(s[i:])
			if size > 1 && c != '\u2028' && c != '\u2029' { // valid UTF-8, copied as it is
				i += size
				continue
			}
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', byte(c))
		case '\b', '\t', '\n', '\f', '\r': // bytes 8, 9, 10, 12 and 13, in short form
			dst = append(dst, '\\', "btn_fr"[c-'\b'])
		case utf8.RuneError: // a byte of invalid UTF-8
			dst = append(dst, `\ufffd`...)
		case '\u2028', '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendStrings appends ss as a JSON array of strings.
func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// textID is an id that the API writes as a string of digits (contact ids, SEED-SPEC.md 2.1).
type textID int64

// decimal is the exact decimal text of a numeric, or null, which the API writes as a JSON number as it is.
type decimal pgtype.Text

// appendObject appends a JSON object of one member per name and value pair of kv, in order: a plain
// identifier, and a pointer to the field that holds the value (*int64, *string, *bool, *time.Time,
// *textID, *commaList; nullable: *pgtype.Int8, *pgtype.Text, *pgtype.Timestamptz, *decimal). One
// encoder for every object, so that each type's JSON is its list of members.
func appendObject(b []byte, kv ...any) []byte {
	b = append(b, '{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		name, ok := kv[i].(string)
		if !ok {
			panic(fmt.Sprintf("appendObject: member %d's name is a %T", i/2, kv[i]))
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		switch v := kv[i+1].(type) {
		case *int64:
			b = strconv.AppendInt(b, *v, 10)
		case *string:
			b = appendString(b, *v)
		case *bool:
			b = strconv.AppendBool(b, *v)
		case *time.Time:
			b = appendTime(b, *v)
		case *textID:
			b = append(b, '"')
			b = strconv.AppendInt(b, int64(*v), 10)
			b = append(b, '"')
		case *commaList:
			b = appendStrings(b, *v)
		case *pgtype.Int8:
			b = appendNull(b, v.Valid)
			if v.Valid {
				b = strconv.AppendInt(b, v.Int64, 10)
			}
		case *pgtype.Text:
			b = appendNull(b, v.Valid)
			if v.Valid {
				b = appendString(b, v.String)
			}
		case *pgtype.Timestamptz:
			b = appendNull(b, v.Valid)
			if v.Valid {
				b = appendTime(b, v.Time)
			}
		case interface{ appendJSON([]byte) []byte }: // custom field values
			b = v.appendJSON(b)
		case *decimal:
			b = appendNull(b, v.Valid)
			if v.Valid {
				b = append(b, v.String...)
			}
		default:
			panic(fmt.Sprintf("appendObject: %s is a %T", name, v))
		}
	}
	return append(b, '}')
}

// appendNull appends null unless valid: a nullable value's NULL.
func appendNull(b []byte, valid bool) []byte {
	if valid {
		return b
	}
	return append(b, "null"...)
}

// appendTime appends t as a JSON string in UTC with exactly three fractional digits:
// "2026-11-21T09:30:00.123Z". Every stored time has a year of 1 to 9999 (input is checked).
// Written out digit by digit: time.AppendFormat was 12% of the CPU of a list page with expansions,
// and this with the list buffer's sizing (handlers.go) measured list100 1.13x, list100+5 1.17x
// (make bench BASELINE=<the tree before>, 20,000 contacts, 3 paired rounds).
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	dst = append(dst, '"')
	dst = appendDigits(dst, year, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, minute, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, second, 2)
	dst = append(dst, '.')
	dst = appendDigits(dst, t.Nanosecond()/1e6, 3)
	return append(dst, 'Z', '"')
}

// appendDigits appends n, which is not negative, as width decimal digits: its last ones, with
// leading zeros.
func appendDigits(dst []byte, n, width int) []byte {
	start := len(dst)
	dst = append(dst, "0000"[:width]...)
	for i := len(dst) - 1; i >= start; i-- {
		dst[i] = byte('0' + n%10)
		n /= 10
	}
	return dst
}

// gzipMinBytes is the smallest body worth compressing; smaller ones are sent as they are.
const gzipMinBytes = 1024

// gzipWriters keeps compressors between answers: each holds about a megabyte of tables that a new one
// would allocate again.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// writeJSON writes a JSON body that is already encoded: gzip-compressed when it is over gzipMinBytes
// and the client accepts gzip (every answer says Vary: Accept-Encoding, see withRequestLog).
func writeJSON(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if len(body) > gzipMinBytes && r.Method != http.MethodHead && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		var buf bytes.Buffer
		zw, ok := gzipWriters.Get().(*gzip.Writer)
		if !ok {
			zw = gzip.NewWriter(&buf)
		}
		zw.Reset(&buf)
		zw.Write(body)
		zw.Close()
		gzipWriters.Put(zw)
		body = buf.Bytes()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip: named, or covered by *, with a
// q-value above 0.
func acceptsGzip(header string) bool {
	star := false
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.TrimSpace(name)
		if !strings.EqualFold(name, "gzip") && name != "*" {
			continue
		}
		ok := true
		if q, found := strings.CutPrefix(strings.TrimSpace(params), "q="); found {
			f, err := strconv.ParseFloat(q, 64)
			ok = err == nil && f > 0
		}
		if name != "*" {
			return ok
		}
		star = ok
	}
	return star
}

// memberRaw returns the value of the member named name, or nil.
func memberRaw(members []member, name string) json.RawMessage {
	i := slices.IndexFunc(members, func(m member) bool { return m.name == name })
	if i < 0 {
		return nil
	}
	return members[i].raw
}

// appendMembers appends members as a JSON object.
func appendMembers(b []byte, members []member) []byte {
	b = append(b, '{')
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(appendString(b, m.name), ':'), m.raw...)
	}
	return append(b, '}')
}
