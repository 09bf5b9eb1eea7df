package modelapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Anthropic starts a stand-in for the Anthropic Messages API
// (POST /v1/messages, streamed as server-sent events when the request asks
// for it: https://docs.anthropic.com/en/api/messages-streaming). Requests
// that offer a tool named bashTool ("Bash" for Claude Code) are the
// conversation: each turn answers with the next step as a tool_use block,
// and the tool_result blocks the agent sends back are recorded. Requests
// without that tool (titles, summaries, quota probes) get a short text.
func Anthropic(script []Step, bashTool string) (*Server, error) {
	return start(script, func(s *Server) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.anthropicMessages(w, r, bashTool) })
		mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"input_tokens":16}`)
		})
		return mux
	})
}

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

const anthropicPrefix = "toolu"

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request, bashTool string) {
	var req anthropicRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	conversation := false
	for _, t := range req.Tools {
		conversation = conversation || t.Name == bashTool
	}
	next := 0
	for _, m := range req.Messages {
		var blocks []anthropicBlock
		if m.Role != "user" || json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			i := stepOf(anthropicPrefix, b.ToolUseID)
			if i < 0 {
				continue
			}
			s.record(i, anthropicText(b.Content), b.IsError)
			next = max(next, i+1)
		}
	}
	var block map[string]any
	stop := "end_turn"
	switch {
	case !conversation:
		block = map[string]any{"type": "text", "text": "Scripted stand-in."}
	case next < len(s.script):
		block = map[string]any{"type": "tool_use", "id": callID(anthropicPrefix, next), "name": bashTool,
			"input": map[string]any{"command": s.script[next].Command, "description": s.script[next].Name}}
		stop = "tool_use"
	default:
		block = map[string]any{"type": "text", "text": FinalText}
		s.finish()
	}
	model := req.Model
	if model == "" {
		model = "claude-standin"
	}
	msgID := fmt.Sprintf("msg_standin_%02d", next)
	usage := map[string]any{"input_tokens": 16, "output_tokens": 8}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	ev := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		rc.Flush()
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": msgID, "type": "message", "role": "assistant",
		"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 16, "output_tokens": 1}}})
	switch block["type"] {
	case "text":
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	case "tool_use":
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
		in, _ := json.Marshal(block["input"])
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 8}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicText flattens a tool_result's content (a string or text blocks).
func anthropicText(raw json.RawMessage) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
