// A context bundle at the head of a model's prompt, where a prompt cache reuses it.
//
// Providers cache the longest prompt prefix they saw recently and bill it at a
// fraction of the input price. A bundle's text runs from the most stable to the
// most volatile: header, the subject's memory and the summary (unchanged until a
// fold), then the turns since the fold (append-only), then what the request
// decided. Put it first and successive bundles of a session share their
// beginning: with automatic prefix caching, `systemMessage(bundle)` as the first
// message is all it takes; with explicit breakpoints (Anthropic's cache_control),
// `anthropicSystem(bundle)` places them where parts 1 and 2 end.

import type { ContextBundle } from './types';

/** A text content block, with a cache breakpoint when `cache_control` is set. */
export interface TextBlock {
  type: 'text';
  text: string;
  cache_control?: Record<string, unknown>;
}

/** The bundle's text in its three parts: stable, log (turns since the fold), the request's. */
export function bundleParts(bundle: ContextBundle): [string, string, string] {
  const raw = Buffer.from(bundle.renderedText, 'utf8');
  const a = bundle.stableEndBytes;
  const b = bundle.logEndBytes;
  return [raw.subarray(0, a).toString('utf8'), raw.subarray(a, b).toString('utf8'), raw.subarray(b).toString('utf8')];
}

/**
 * The bundle as text blocks, a cache breakpoint closing each of its first two parts (default
 * `{ type: 'ephemeral' }`). Empty parts are left out; the texts joined are `renderedText`.
 */
export function textBlocks(bundle: ContextBundle, cacheControl: Record<string, unknown> = { type: 'ephemeral' }): TextBlock[] {
  const [stable, log, request] = bundleParts(bundle);
  const blocks: TextBlock[] = [];
  for (const [text, cached] of [[stable, true], [log, true], [request, false]] as const) {
    if (text.length === 0) continue;
    blocks.push(cached ? { type: 'text', text, cache_control: { ...cacheControl } } : { type: 'text', text });
  }
  return blocks;
}

/** An Anthropic Messages `system` value: the bundle with breakpoints after parts 1 and 2 (two of the four allowed). */
export function anthropicSystem(bundle: ContextBundle, cacheControl?: Record<string, unknown>): TextBlock[] {
  return textBlocks(bundle, cacheControl);
}

/** A chat message holding the bundle, to put first (automatic prefix caching). */
export function systemMessage(bundle: ContextBundle, role = 'system'): { role: string; content: string } {
  return { role, content: bundle.renderedText };
}
