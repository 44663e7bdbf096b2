/*
 * fetch: HTTP requests to the hosts the operator's declaration grants.
 *   fetch {url, method?, body?} -> {"status": N, "headers": ["name: value", ...], "body": "..."}
 * The body is returned as text when it is UTF-8; otherwise "body" is null and "body_bytes" gives
 * its size. Redirects are returned, never followed (berm.http.fetch).
 */
#include <berm.h>
#include <stdio.h>
#include <string.h>

#include "../json.h"

BERM_USAGE("Fetch URLs over HTTP(S) from the declared hosts.");
BERM_DEP("http");

BERM_TOOL(fetch, "Send one HTTP request; returns status, headers and body as JSON.",
          "{\"type\":\"object\",\"required\":[\"url\"],\"properties\":{"
          "\"url\":{\"type\":\"string\"},\"method\":{\"type\":\"string\"},"
          "\"body\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  char *url, *method = "GET", *body = "";
  size_t body_len = 0;
  if (json_string(args, "url", &url, NULL) != 1) return berm_fail_str("url must be a string");
  if (json_string(args, "method", &method, NULL) < 0) return berm_fail_str("method must be a string");
  if (json_string(args, "body", &body, &body_len) < 0) return berm_fail_str("body must be a string");
  berm_reply r = berm_http_fetch(method, url, body, body_len, NULL);
  if (!r.ok) return berm_failf("fetch %s: %s", r.refused ? "refused" : "failed", r.data);
  berm_http_response res;
  if (berm_http_parse(&r, &res)) return berm_fail_str("fetch: malformed reply from the host");
  const char *h = res.headers.ptr, *hend = h + res.headers.len;
  int text = json_is_utf8(res.body.ptr, res.body.len);
  char *out = berm_alloc(64 + 6 * (res.headers.len + (text ? res.body.len : 0)) + 2 * res.headers.len);
  if (!out) return berm_fail_str("fetch: response too large for memory");
  char *o = out;
  o += sprintf(o, "{\"status\":%lld,\"headers\":[", (long long)res.status);
  int first = 1;
  while (h < hend) {
    const char *nl = memchr(h, '\n', (size_t)(hend - h));
    const char *e = nl ? nl : hend;
    if (e > h) {
      if (!first) *o++ = ',';
      first = 0;
      json_put_string(&o, h, (size_t)(e - h));
    }
    h = nl ? nl + 1 : hend;
  }
  json_put_raw(&o, "],\"body\":");
  if (text) {
    json_put_string(&o, res.body.ptr, res.body.len);
  } else {
    o += sprintf(o, "null,\"body_bytes\":%llu", (unsigned long long)res.body.len);
  }
  *o++ = '}';
  berm_done(out, (size_t)(o - out));
}
