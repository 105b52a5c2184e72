package journal

import "unicode/utf8"

// bodyText returns a stored body as text when it is valid UTF-8, else as
// bytes for base64 (one of the two is set).
func bodyText(body []byte) (text string, raw []byte) {
	if utf8.Valid(body) {
		return string(body), nil
	}
	return "", body
}

func setBody(d *Detail, body []byte) {
	d.Body, d.BodyBase64 = bodyText(body)
}
