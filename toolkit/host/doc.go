// Package host declares the tools whose work is done by a service of the
// embedding program: subagents, background_subagents, list_chatbot,
// send_to_chatbot, generate_audio and generate_image.
//
// The package owns their names, descriptions, argument schemas, flags and
// timeouts; the host supplies only the handlers, in a Handlers value given
// to Register. A tool whose handler is nil is not registered, but Flags
// still knows its flags (SPEC section 5): subagents, background_subagents,
// list_chatbot and send_to_chatbot run concurrently, generate_audio and
// generate_image alone; only list_chatbot is read-only, the others spend
// money or act and go through the confirm gate.
//
// Arguments a handler receives (validated, canonical):
//
//	subagents, background_subagents  {tasks: [{task, name?, context?, tools?: [string]}]} (1 to 10 tasks)
//	list_chatbot                     {query?}
//	send_to_chatbot                  {chatbot, message, conversation_id?}
//	generate_audio                   {text, voice?, format?: mp3|wav|ogg, output_path?}
//	generate_image                   {prompt, size?: 256x256|512x512|1024x1024|1024x1792|1792x1024, count?: 1-4, output_path?}
//
// output_path is workspace-relative; refusing other paths is the handler's
// job. The package knows nothing of actors, the store or the services
// themselves.
package host
