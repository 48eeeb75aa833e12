// Package sdktypes type-checks the JSON shapes tooldispatch emits against
// the providers' own TypeScript SDKs (openai, @anthropic-ai/sdk,
// @google/genai), with tsc --noEmit --strict: a reply or tools array whose
// shape a provider's types do not accept fails the test that checks it.
//
// The npm packages are pinned by this folder's package-lock.json and
// installed by the first test that needs them (npm ci, once per machine);
// a test skips saying so where Node.js is absent. It is test support: it
// knows nothing of tooldispatch's own packages, only JSON.
package sdktypes
