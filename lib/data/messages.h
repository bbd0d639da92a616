/* data/messages: a conversation as JSONL data writes it, read for the chat template.
 *
 *   OpenAI style  "messages": [{"role", "content", ...}]: content is a string, or a list of text parts
 *                 ([{"type": "text", "text": ...}], joined in order with nothing between, as the
 *                 templates that take parts render them; a part of another type, such as an
 *                 image, is an error: zt trains on text), or none (null or left out) in a turn
 *                 that has "tool_calls". The message's other members (tool_calls, tool_call_id,
 *                 name, reasoning_content...) go to the template as they are (zt_message.json).
 *   ShareGPT      "conversations": [{"from", "value"}], made OpenAI-style messages by
 *                 zt_messages_normalize: from human, gpt, system, tool (observation, as
 *                 LLaMA-Factory writes it) or function_call (LLaMA-Factory's: the value is a
 *                 JSON call {"name", "arguments"} or a list of them, a turn of tool calls with
 *                 empty content); a string "system" beside them is a first system turn, unless
 *                 the conversation starts with one.
 *
 * A row's "tools" (a list of function schemas, or null) is what the template gets as tools, and
 * its "chat_template_kwargs" (an object, or null) more variables for the template.
 *
 * JSON written as a string where the templates want its value is read first (zt_messages_normalize):
 * "tools" as a string (Hermes' and xLAM's function-calling data), and a tool call's "arguments"
 * as OpenAI's API writes them (a string holding an object), which transformers' docs require as
 * the object and vLLM's server turns into it before the template renders them.
 *
 *     zt_message *m; int n;
 *     st = zt_messages_normalize(row);                                       // ShareGPT, JSON strings
 *     if (!st) st = zt_messages_read(cJSON_GetObjectItem(row, "messages"), &m, &n);   // free(m)
 *
 * Errors are ZT_EUSER and name the message and part (0-based, as the list indexes them).
 */
#ifndef ZT_DATA_MESSAGES_H
#define ZT_DATA_MESSAGES_H

#include <cjson/cJSON.h>

#include "lib/core/status.h"
#include "lib/data/template.h"

/* The OpenAI-style messages of list: *out points into list and into its own block (free(*out)
 * frees both), *n of them; an empty list is an error. */
zt_status zt_messages_read(const cJSON *list, zt_message **out, int *n);

/* Rewrites row as the readers want it: ShareGPT "conversations" as "messages" (unless it has
 * both), and JSON written as strings replaced by the values they hold (above): "tools", and the
 * "arguments" of the tool calls in its message lists (messages, prompt, completion, chosen,
 * rejected). What does not hold what it should is an error naming it. */
zt_status zt_messages_normalize(cJSON *row);

/* The row's "tools" (a list) and "chat_template_kwargs" (an object); NULL when o (which may be
 * NULL) has none, or null. */
zt_status zt_messages_extras(const cJSON *o, const cJSON **tools, const cJSON **kwargs);

#endif
