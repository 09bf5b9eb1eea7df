package modelapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
)

// OpenAI starts a stand-in for the OpenAI Responses API (POST /responses
// below the base URL, streamed as server-sent events:
// https://platform.openai.com/docs/api-reference/responses-streaming), as
// Codex uses it through a custom model provider whose base_url is
// Server.URL + "/v1". Each turn answers with the next step as a
// function_call to the shell tool the request offers (Codex names it
// "shell", "shell_command" or "exec_command" depending on its version and
// model family); function_call_output items sent back are recorded.
func OpenAI(script []Step) (*Server, error) {
	return start(script, func(s *Server) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/responses", s.openaiResponses)
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[],"models":[]}`)
		})
		return mux
	})
}

type openaiRequest struct {
	Model string            `json:"model"`
	Input []json.RawMessage `json:"input"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

const openaiPrefix = "call"

// shellTools are the names Codex has given its shell tool, most preferred
// first, with the arguments each takes.
var shellTools = []string{"shell", "shell_command", "exec_command"}

func shellArgs(tool, command string) map[string]any {
	switch tool {
	case "shell":
		return map[string]any{"command": []string{"bash", "-lc", command}}
	case "shell_command":
		return map[string]any{"command": command}
	default: // exec_command
		return map[string]any{"cmd": command}
	}
}

func (s *Server) openaiResponses(w http.ResponseWriter, r *http.Request) {
	var req openaiRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	tool := ""
	for _, name := range shellTools {
		if slices.ContainsFunc(req.Tools, func(t struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}) bool {
			return t.Name == name
		}) {
			tool = name
			break
		}
	}
	next := 0
	for _, raw := range req.Input {
		var item struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(raw, &item) != nil || item.Type != "function_call_output" {
			continue
		}
		i := stepOf(openaiPrefix, item.CallID)
		if i < 0 {
			continue
		}
		s.record(i, openaiOutput(item.Output), false)
		next = max(next, i+1)
	}
	respID := fmt.Sprintf("resp_standin_%02d", next)
	var item map[string]any
	switch {
	case tool != "" && next < len(s.script):
		args, _ := json.Marshal(shellArgs(tool, s.script[next].Command))
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_standin_%02d", next), "call_id": callID(openaiPrefix, next),
			"name": tool, "arguments": string(args), "status": "completed"}
	default:
		text := "Scripted stand-in."
		if tool != "" {
			text = FinalText
			s.finish()
		}
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_standin_%02d", next), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	ev := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		rc.Flush()
	}
	resp := map[string]any{"id": respID, "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}
	ev("response.created", map[string]any{"response": resp})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	done := map[string]any{"id": respID, "object": "response", "status": "completed", "model": req.Model, "output": []any{item},
		"usage": map[string]any{"input_tokens": 16, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 8, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 24}}
	ev("response.completed", map[string]any{"response": done})
}

// openaiOutput flattens a function_call_output's output (a string, or
// content items with text).
func openaiOutput(raw json.RawMessage) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var items []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &items)
	out := ""
	for _, it := range items {
		out += it.Text
	}
	return out
}
