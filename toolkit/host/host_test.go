package host_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/host"
)

func handler(text string) toolkit.Handler {
	return func(context.Context, *toolkit.Call) (toolkit.Result, error) {
		return toolkit.Result{Content: text}, nil
	}
}

func TestRegisterOnlySuppliedHandlers(t *testing.T) {
	tests := []struct {
		name string
		h    host.Handlers
		want []string
	}{
		{"none", host.Handlers{}, nil},
		{"subagents only", host.Handlers{Subagents: handler("s")}, []string{"subagents"}},
		{
			name: "chatbots and images",
			h:    host.Handlers{ListChatbot: handler("l"), SendToChatbot: handler("s"), GenerateImage: handler("i")},
			want: []string{"generate_image", "list_chatbot", "send_to_chatbot"},
		},
		{
			name: "all",
			h: host.Handlers{Subagents: handler("1"), BackgroundSubagents: handler("2"), ListChatbot: handler("3"),
				SendToChatbot: handler("4"), GenerateAudio: handler("5"), GenerateImage: handler("6")},
			want: []string{"background_subagents", "generate_audio", "generate_image", "list_chatbot", "send_to_chatbot", "subagents"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := toolkit.NewRegistry()
			host.Register(reg, tt.h)
			var got []string
			for _, tool := range reg.All() {
				got = append(got, tool.Name)
				if tool.Source != toolkit.SourceHost {
					t.Errorf("%s: source %s, want host", tool.Name, tool.Source)
				}
				concurrent, readOnly, ok := host.Flags(tool.Name)
				if !ok || tool.Concurrent != concurrent || tool.ReadOnly != readOnly || tool.ReadOnlyFunc != nil {
					t.Errorf("%s: registered flags concurrent %v, read-only %v differ from Flags %v, %v, %v",
						tool.Name, tool.Concurrent, tool.ReadOnly, concurrent, readOnly, ok)
				}
				if tool.Timeout <= 0 || tool.Description == "" {
					t.Errorf("%s: timeout %s, description %q", tool.Name, tool.Timeout, tool.Description)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("registered tools (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRegisteredHandlerIsTheHosts(t *testing.T) {
	reg := toolkit.NewRegistry()
	host.Register(reg, host.Handlers{Subagents: handler("from subagents"), GenerateAudio: handler("from audio")})
	for name, want := range map[string]string{"subagents": "from subagents", "generate_audio": "from audio"} {
		tool, _ := reg.Lookup(name)
		res, err := tool.Handler(context.Background(), &toolkit.Call{Name: name})
		if err != nil || res.Content != want {
			t.Errorf("%s ran %q, %v; want %q", name, res.Content, err, want)
		}
	}
}

func TestFlags(t *testing.T) {
	type flags struct{ Concurrent, ReadOnly, OK bool }
	want := map[string]flags{
		"subagents":            {true, false, true},
		"background_subagents": {true, false, true},
		"list_chatbot":         {true, true, true},
		"send_to_chatbot":      {true, false, true},
		"generate_audio":       {false, false, true},
		"generate_image":       {false, false, true},
		"read_files":           {false, false, false},
		"":                     {false, false, false},
	}
	for name, w := range want {
		c, r, ok := host.Flags(name)
		if got := (flags{c, r, ok}); got != w {
			t.Errorf("Flags(%q) = %+v, want %+v", name, got, w)
		}
	}
	names := host.Names()
	if len(names) != 6 || !slices.IsSorted(names) {
		t.Errorf("Names() = %v, want the six host tools in name order", names)
	}
}

func TestSchemasValidate(t *testing.T) {
	all := host.Handlers{Subagents: handler(""), BackgroundSubagents: handler(""), ListChatbot: handler(""),
		SendToChatbot: handler(""), GenerateAudio: handler(""), GenerateImage: handler("")}
	reg := toolkit.NewRegistry()
	host.Register(reg, all)
	tests := []struct {
		tool, args string
		ok         bool
	}{
		{"subagents", `{"tasks":[{"task":"summarise README.md","name":"docs","tools":["read_files"]}]}`, true},
		{"subagents", `{"tasks":[]}`, false},
		{"subagents", `{"tasks":[{"name":"no task"}]}`, false},
		{"background_subagents", `{"tasks":[{"task":"watch the build","priority":1}]}`, false},
		{"list_chatbot", `{}`, true},
		{"send_to_chatbot", `{"chatbot":"legal","message":"Is this clause fine?"}`, true},
		{"send_to_chatbot", `{"message":"hi"}`, false},
		{"generate_audio", `{"text":"Hello","format":"wav"}`, true},
		{"generate_audio", `{"text":"Hello","format":"flac"}`, false},
		{"generate_image", `{"prompt":"a lighthouse","size":"1024x1024","count":2}`, true},
		{"generate_image", `{"prompt":"a lighthouse","count":9}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			tool, _ := reg.Lookup(tt.tool)
			sch, err := reg.Schemas.Compile(tool.Schema)
			if err != nil {
				t.Fatal(err)
			}
			a, err := toolkit.ParseArgs(tt.args, toolkit.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(a.Value); (err == nil) != tt.ok {
				t.Errorf("valid = %v, want %v (%v)", err == nil, tt.ok, err)
			}
		})
	}
}

func TestOutputPaths(t *testing.T) {
	reg := toolkit.NewRegistry()
	host.Register(reg, host.Handlers{GenerateImage: handler(""), Subagents: handler("")})
	img, _ := reg.Lookup("generate_image")
	for args, want := range map[string][]string{
		`{"prompt":"x","output_path":"images/./logo.png"}`: {"images/logo.png"},
		`{"prompt":"x","output_path":"../logo.png"}`:       nil,
		`{"prompt":"x","output_path":"/etc/logo.png"}`:     nil,
		`{"prompt":"x"}`: nil,
	} {
		a, err := toolkit.ParseArgs(args, toolkit.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, img.Paths(a)); diff != "" {
			t.Errorf("%s: paths (-want +got):\n%s", args, diff)
		}
	}
	if sub, _ := reg.Lookup("subagents"); sub.Paths != nil {
		t.Error("subagents declares paths")
	}
}
