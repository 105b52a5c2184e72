package journal

import "unicode/utf8"

func setBody(d *Detail, body []byte) {
	if utf8.Valid(body) {
		d.Body = string(body)
		return
	}
	d.BodyBase64 = body
}
