package modelapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// sseData returns the data lines of an event stream, decoded.
func sseData(t *testing.T, stream string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stream))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("bad SSE data %q: %v", d, err)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestAnthropicScript(t *testing.T) {
	s, err := Anthropic([]Step{{"one", "echo 1"}, {"two", "echo 2"}}, "Bash")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := s.URL + "/v1/messages"
	tools := `"tools":[{"name":"Bash"}]`
	// First turn: the first step as a streamed tool_use.
	ev := sseData(t, post(t, url, `{"stream":true,`+tools+`,"messages":[{"role":"user","content":"go"}]}`))
	var input string
	for _, e := range ev {
		if d, ok := e["delta"].(map[string]any); ok && d["type"] == "input_json_delta" {
			input = d["partial_json"].(string)
		}
	}
	if !strings.Contains(input, `"command":"echo 1"`) || ev[len(ev)-1]["type"] != "message_stop" {
		t.Fatalf("first turn: %v", ev)
	}
	// A side request without the tool gets text, and changes nothing.
	if out := post(t, url, `{"messages":[{"role":"user","content":"title?"}]}`); !strings.Contains(out, `"type":"text"`) {
		t.Errorf("side request: %s", out)
	}
	// The result of step one comes back: recorded, step two asked.
	out := post(t, url, `{"stream":false,`+tools+`,"messages":[{"role":"user","content":"go"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_step_00","content":[{"type":"text","text":"1"}]}]}]}`)
	if !strings.Contains(out, `"command":"echo 2"`) || !strings.Contains(out, `"stop_reason":"tool_use"`) {
		t.Errorf("second turn: %s", out)
	}
	if r := s.Results()["one"]; r.Output != "1" || r.IsError {
		t.Errorf("recorded %+v", r)
	}
	if s.Done() {
		t.Errorf("done before the last result")
	}
	out = post(t, url, `{`+tools+`,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_step_01","content":"2","is_error":true}]}]}`)
	if !strings.Contains(out, FinalText) || !s.Done() || !s.Results()["two"].IsError {
		t.Errorf("last turn: %s, done %v, results %+v", out, s.Done(), s.Results())
	}
}

func TestOpenAIScript(t *testing.T) {
	s, err := OpenAI([]Step{{"one", "echo 1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := s.URL + "/v1/responses"
	for _, tool := range []string{"shell", "shell_command", "exec_command"} {
		ev := sseData(t, post(t, url, `{"model":"m","tools":[{"type":"function","name":"`+tool+`"}],"input":[]}`))
		item := ev[len(ev)-1]["response"].(map[string]any)["output"].([]any)[0].(map[string]any)
		if item["type"] != "function_call" || item["name"] != tool || !strings.Contains(item["arguments"].(string), "echo 1") {
			t.Errorf("tool %s: %v", tool, item)
		}
	}
	out := post(t, url, `{"tools":[{"name":"shell"}],"input":[{"type":"function_call_output","call_id":"call_step_00","output":"1\n"}]}`)
	if !strings.Contains(out, FinalText) || !s.Done() || s.Results()["one"].Output != "1\n" {
		t.Errorf("last turn: %s, results %+v", out, s.Results())
	}
}
