package daemon

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bytes to the decoder of every request
// type: it must never panic, must answer every failure with an *Error that
// has a status and a message, and must only accept what validation allows.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"argv":["sh","-c","true"],"dir":"/tmp","policy":{"sandbox":"read-only"}}`,
		`{"argv":[],"dir":"/"}`,
		`{"pid":42,"dir":"/home/u","policy":{"allow_net":["github.com:443"]}}`,
		`{"reply":"once"}`,
		`{"tool":"bash","input":"git status && rm -rf /","agent":"build"}`,
		`{"signal":2}`,
		`{"argv":["x"],"dir":"/","bogus":true}`,
		`{"argv":["x"],"dir":"/"} {}`,
		`{"argv":["a\u0000b"],"dir":"/"}`,
		`[1,2,3]`, `null`, `{`, "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []request{&RunRequest{}, &AttachRequest{}, &ExecRequest{}, &ReplyRequest{}, &CheckRequest{}, &SignalRequest{}} {
			err := DecodeRequest(bytes.NewReader(data), v)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Status < 400 || e.Message == "" || e.Code == "" {
					t.Fatalf("%T: error without status, code or message: %#v", v, err)
				}
				continue
			}
			if err := v.validate(); err != nil {
				t.Fatalf("%T accepted but invalid: %v", v, err)
			}
			switch r := v.(type) {
			case *RunRequest:
				if len(r.Argv) == 0 || r.Dir == "" || r.Dir[0] != '/' {
					t.Fatalf("RunRequest accepted without argv or absolute dir: %+v", r)
				}
			case *ReplyRequest:
				if r.Reply != ReplyOnce && r.Reply != ReplyAlways && r.Reply != ReplyReject {
					t.Fatalf("ReplyRequest accepted reply %q", r.Reply)
				}
			}
		}
	})
}

func TestDecodeRequestErrors(t *testing.T) {
	big := append([]byte(`{"argv":["`), bytes.Repeat([]byte("a"), MaxRequestBytes)...)
	big = append(big, []byte(`"],"dir":"/"}`)...)
	for _, tc := range []struct {
		name, body string
		status     int
		code, want string
	}{
		{"empty", "", 400, "bad_request", "empty request body"},
		{"malformed", `{"argv":`, 400, "bad_request", "unexpected end"},
		{"syntax", `{"argv" ["x"]}`, 400, "bad_request", "malformed JSON at byte"},
		{"unknown field", `{"argv":["x"],"dir":"/","user":"root"}`, 400, "unknown_field", `unknown field "user"`},
		{"wrong type", `{"argv":"x","dir":"/"}`, 400, "bad_request", `field "argv"`},
		{"trailing", `{"argv":["x"],"dir":"/"} {"argv":["y"]}`, 400, "bad_request", "trailing data"},
		{"no argv", `{"dir":"/"}`, 400, "bad_request", "no command given"},
		{"relative dir", `{"argv":["x"],"dir":"tmp"}`, 400, "bad_request", "not an absolute path"},
		{"nul", `{"argv":["a\u0000"],"dir":"/"}`, 400, "bad_request", "NUL"},
		{"bad env", `{"argv":["x"],"dir":"/","env":["NOEQUALS"]}`, 400, "bad_request", "not NAME=VALUE"},
		{"too large", string(big), 413, "too_large", "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r RunRequest
			err := DecodeRequest(bytes.NewReader([]byte(tc.body)), &r)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error", err)
			}
			if e.Status != tc.status || e.Code != tc.code || !bytes.Contains([]byte(e.Message), []byte(tc.want)) {
				t.Fatalf("got %d %s %q, want %d %s containing %q", e.Status, e.Code, e.Message, tc.status, tc.code, tc.want)
			}
		})
	}
	var ok RunRequest
	if err := DecodeRequest(bytes.NewReader([]byte(`{"argv":["sh"],"dir":"/","env":["A=1"]}`)), &ok); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	if ok.Argv[0] != "sh" || ok.Env[0] != "A=1" {
		t.Fatalf("decoded %+v", ok)
	}
	var rep ReplyRequest
	if err := DecodeRequest(bytes.NewReader([]byte(`{"reply":"maybe"}`)), &rep); err == nil {
		t.Fatal("reply maybe accepted")
	}
	var sig SignalRequest
	if err := DecodeRequest(bytes.NewReader([]byte(`{"signal":9}`)), &sig); err == nil {
		t.Fatal("SIGKILL forwarding accepted")
	}
}
