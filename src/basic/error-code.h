/* error-code.h: every error code clsd sets, in one list: its enum name, the stable string the API shows
 * (clients and tests compare it: never change one) and its HTTP status. The enum, the string table and the
 * status table are made from this list, so that no code can lack a string or a status. */
#pragma once

/* clang-format off */
#define ERROR_CODE_LIST(X) \
        X(MALFORMED_JSON, "malformed_json", 400) \
        X(UNKNOWN_FIELD, "unknown_field", 400) \
        X(WRONG_TYPE, "wrong_type", 400) \
        X(MISSING_FIELD, "missing_field", 400) \
        X(INVALID_VALUE, "invalid_value", 400) \
        X(BAD_REQUEST, "bad_request", 400) \
        X(BAD_CURSOR, "bad_cursor", 400) \
        X(UNAUTHORIZED, "unauthorized", 401) \
        X(OBJECT_PATH_REFUSED, "object_path_refused", 403) \
        X(FORBIDDEN, "forbidden", 403) \
        X(ROUTE_NOT_FOUND, "route_not_found", 404) \
        X(DOCUMENT_NOT_FOUND, "document_not_found", 404) \
        X(NETNS_NOT_FOUND, "netns_not_found", 404) \
        X(OBJECT_NOT_FOUND, "object_not_found", 404) \
        X(POLICY_NOT_FOUND, "policy_not_found", 404) \
        X(OBJECT_FILE_NOT_FOUND, "object_file_not_found", 404) \
        X(UNKNOWN_MAP, "unknown_map", 404) \
        X(ENTRY_NOT_FOUND, "entry_not_found", 404) \
        X(METRIC_NOT_FOUND, "metric_not_found", 404) \
        X(METHOD_NOT_ALLOWED, "method_not_allowed", 405) \
        X(PRIORITY_TAKEN, "priority_taken", 409) \
        X(OBJECT_IN_USE, "object_in_use", 409) \
        X(HOG_OWNED, "hog_owned", 409) \
        X(FLEET_OWNED, "fleet_owned", 409) \
        X(NAME_TAKEN, "name_taken", 409) \
        X(DEVICE_TAKEN, "device_taken", 409) \
        X(REPAIR_LOOP, "repair_loop", 409) \
        X(MAP_AMBIGUOUS, "map_ambiguous", 409) \
        X(PRECONDITION_FAILED, "precondition_failed", 412) \
        X(PAYLOAD_TOO_LARGE, "payload_too_large", 413) \
        X(UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415) \
        X(TOO_MANY_REQUESTS, "too_many_requests", 429) \
        X(HEADERS_TOO_LARGE, "headers_too_large", 431) \
        X(INVALID_OBJECT, "invalid_object", 422) \
        X(PROGRAM_NOT_FOUND, "program_not_found", 422) \
        X(PROGRAM_AMBIGUOUS, "program_ambiguous", 422) \
        X(WRONG_PROGRAM_TYPE, "wrong_program_type", 422) \
        X(VERIFIER_REJECTED, "verifier_rejected", 422) \
        X(DUPLICATE_NAME, "duplicate_name", 422) \
        X(DUPLICATE_PRIORITY, "duplicate_priority", 422) \
        X(ACT_BPF_UNAVAILABLE, "act_bpf_unavailable", 422) \
        X(TCX_UNAVAILABLE, "tcx_unavailable", 422) \
        X(DUPLICATE_PROGRAM, "duplicate_program", 422) \
        X(MAP_NOT_FOUND, "map_not_found", 422) \
        X(MAP_INCOMPATIBLE, "map_incompatible", 422) \
        X(MAP_UNREADABLE, "map_unreadable", 422) \
        X(PARENT_NOT_FOUND, "parent_not_found", 422) \
        X(OBJECT_UNSIGNED, "object_unsigned", 422) \
        X(OBJECT_SIGNATURE_INVALID, "object_signature_invalid", 422) \
        X(OBJECT_UNTRUSTED, "object_untrusted", 422) \
        X(IMAGE_NOT_FOUND, "image_not_found", 422) \
        X(IMAGE_INVALID, "image_invalid", 422) \
        X(IMAGE_DIGEST_MISMATCH, "image_digest_mismatch", 422) \
        X(REGISTRY_AUTH_FAILED, "registry_auth_failed", 422) \
        X(REGISTRY_UNREACHABLE, "registry_unreachable", 422) \
        X(REGISTRY_ERROR, "registry_error", 422) \
        X(MAP_UNWRITABLE, "map_unwritable", 422) \
        X(MAP_FULL, "map_full", 422) \
        X(QUOTA_EXCEEDED, "quota_exceeded", 507) \
        X(KERNEL_ERROR, "kernel_error", 500) \
        X(STORE_ERROR, "store_error", 500) \
        X(INTERNAL_ERROR, "internal_error", 500) \
        /* clsd's own files and configuration: the host's fault, not the request's */ \
        X(CORRUPT, "corrupt", 500) \
        X(UNREADABLE, "unreadable", 500) \
        X(FORMAT_TOO_NEW, "format_too_new", 500) \
        X(INVALID_CONFIG, "invalid_config", 500) \
        /* another clsd holds the state directory: later, not never */ \
        X(STORE_BUSY, "store_busy", 503) \
        /* etcd, for clsd (a gateway's errors: clsd's credentials, not the client's); busy or down: 503 */ \
        X(ETCD_ERROR, "etcd_error", 502) \
        X(ETCD_UNREACHABLE, "etcd_unreachable", 503) \
        X(ETCD_OVERLOADED, "etcd_overloaded", 503) \
        X(ETCD_PERMISSION_DENIED, "etcd_permission_denied", 502) \
        X(ETCD_AUTH_FAILED, "etcd_auth_failed", 502) \
        X(ETCD_TOKEN_INVALID, "etcd_token_invalid", 502) \
        X(ETCD_LEASE_NOT_FOUND, "etcd_lease_not_found", 502) \
        X(OBJECT_CORRUPT, "object_corrupt", 502)

typedef enum ErrorCode {
        ERROR_CODE_NONE = 0, /* no error */
#define ERROR_CODE_ENUM(name, string, status) ERROR_##name,
        ERROR_CODE_LIST(ERROR_CODE_ENUM)
#undef ERROR_CODE_ENUM
        _ERROR_CODE_MAX,
} ErrorCode;
/* clang-format on */

/* The code's stable string; NULL for ERROR_CODE_NONE or a value out of range. */
const char *error_code_to_string(ErrorCode code);
/* The code whose string is s; ERROR_INTERNAL_ERROR for NULL or a string that names none: a code read back
 * (a worker's answer, a stored record) that this clsd does not know is a defect, never the client's fault.
 */
ErrorCode error_code_from_string(const char *s);
/* The HTTP status the API answers code with; 500 for ERROR_CODE_NONE or a value out of range. */
unsigned error_code_status(ErrorCode code);
