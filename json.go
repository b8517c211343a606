package main

import (
	"database/sql"
	"strconv"
	"time"
	"unicode/utf8"
)

// Hand-written JSON output. Every response body is appended into a []byte with these helpers, in a
// fixed key order and without reflection; appendString matches encoding/json's json.Marshal byte for
// byte (FuzzAppendString holds it to that).

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
// escaped, and each byte of invalid UTF-8 replaced by \ufffd. It does not allocate beyond growing dst.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendNullString appends s as a JSON string, or null when it is not valid.
func appendNullString(dst []byte, s sql.NullString) []byte {
	if !s.Valid {
		return append(dst, "null"...)
	}
	return appendString(dst, s.String)
}

// appendNullInt appends n as a JSON number, or null when it is not valid.
func appendNullInt(dst []byte, n sql.NullInt64) []byte {
	if !n.Valid {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, n.Int64, 10)
}

// appendTime appends t as a JSON string in UTC with exactly three fractional digits:
// "2026-11-21T09:30:00.123Z".
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
		return append(dst, '"')
	}
	// Written by hand: this runs twice per object, and AppendFormat's layout parsing was 8% of a
	// list page's CPU time.
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(dst, '"',
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z', '"')
}

// appendNullTime appends t like appendTime, or null when it is not valid.
func appendNullTime(dst []byte, t sql.NullTime) []byte {
	if !t.Valid {
		return append(dst, "null"...)
	}
	return appendTime(dst, t.Time)
}
