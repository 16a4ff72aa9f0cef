/* test_diff.c - three-way diffs: added, removed, updated with the parts
 * that changed, unchanged; equivalent spellings are unchanged; the same
 * diff from documents, snapshots and apply reports; reordered routes (a
 * move of rank, not an update); instance diffs. */
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <string.h>

static sy_document *doc(const char *json) {
    sy_document *d;
    sy_error err;
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    ck_assert_msg(sy_document_parse(json, strlen(json), &po, &d, &err) == 0,
                  "%s: %s", err.path, err.message);
    return d;
}

static sy_diff *diff_of(const char *a, const char *b) {
    sy_document *da = doc(a), *db = doc(b);
    sy_diff *d;
    ck_assert_int_eq(sy_diff_documents(da, db, NULL, &d, NULL), 0);
    sy_document_free(da);
    sy_document_free(db);
    return d;
}

#define BASE                                                                   \
    "{\"id\":\"r\",\"uri\":\"http://a:80\",\"order\":1,"                       \
    "\"predicates\":[\"Path=/a/**\",\"Method=GET\"],"                          \
    "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"k\":\"v\"}}"

static unsigned changed_mask(const char *other) {
    char a[1024], b[1024];
    snprintf(a, sizeof a, "[%s]", BASE);
    snprintf(b, sizeof b, "[%s]", other);
    sy_diff *d = diff_of(a, b);
    unsigned mask = 0;
    ck_assert_uint_eq(sy_diff_updated_count(d) + sy_diff_unchanged_count(d), 1);
    if (sy_diff_updated_count(d))
        ck_assert_str_eq(sy_diff_updated(d, 0, &mask), "r");
    sy_diff_free(d);
    return mask;
}

START_TEST(added_removed_and_unchanged_are_counted) {
    sy_diff *d = diff_of("[{\"id\":\"a\",\"uri\":\"http://a:80\"},"
                         "{\"id\":\"b\",\"uri\":\"http://b:80\"}]",
                         "[{\"id\":\"b\",\"uri\":\"http://b:80\"},"
                         "{\"id\":\"c\",\"uri\":\"http://c:80\"}]");
    ck_assert_uint_eq(sy_diff_added_count(d), 1);
    ck_assert_str_eq(sy_diff_added(d, 0), "c");
    ck_assert_uint_eq(sy_diff_removed_count(d), 1);
    ck_assert_str_eq(sy_diff_removed(d, 0), "a");
    ck_assert_uint_eq(sy_diff_updated_count(d), 0);
    ck_assert_uint_eq(sy_diff_unchanged_count(d), 1);
    ck_assert_ptr_null(sy_diff_added(d, 1));
    sy_diff_free(d);
}
END_TEST

START_TEST(each_changed_part_is_named) {
    ck_assert_uint_eq(
        changed_mask(
            "{\"id\":\"r\",\"uri\":\"http://a:80\",\"order\":1,"
            "\"predicates\":[\"Path=/b/**\",\"Method=GET\"],"
            "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"k\":\"v\"}}"),
        SY_CHANGED_PREDICATES);
    ck_assert_uint_eq(
        changed_mask(
            "{\"id\":\"r\",\"uri\":\"http://a:80\",\"order\":1,"
            "\"predicates\":[\"Path=/a/**\",\"Method=GET\"],"
            "\"filters\":[\"StripPrefix=2\"],\"metadata\":{\"k\":\"v\"}}"),
        SY_CHANGED_FILTERS);
    ck_assert_uint_eq(
        changed_mask(
            "{\"id\":\"r\",\"uri\":\"http://b:80\",\"order\":1,"
            "\"predicates\":[\"Path=/a/**\",\"Method=GET\"],"
            "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"k\":\"v\"}}"),
        SY_CHANGED_URI);
    ck_assert_uint_eq(
        changed_mask(
            "{\"id\":\"r\",\"uri\":\"http://a:80\",\"order\":1,"
            "\"predicates\":[\"Path=/a/**\",\"Method=GET\"],"
            "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"k\":\"w\"}}"),
        SY_CHANGED_METADATA);
    ck_assert_uint_eq(
        changed_mask(
            "{\"id\":\"r\",\"uri\":\"http://a:80\",\"order\":2,"
            "\"predicates\":[\"Path=/a/**\",\"Method=GET\"],"
            "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"k\":\"v\"}}"),
        SY_CHANGED_ORDER);
    ck_assert_uint_eq(
        changed_mask(
            "{\"id\":\"r\",\"uri\":\"http://b:80\",\"order\":3,"
            "\"predicates\":[\"Path=/a/**\"],"
            "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"k\":\"v\"}}"),
        SY_CHANGED_URI | SY_CHANGED_ORDER | SY_CHANGED_PREDICATES);
}
END_TEST

START_TEST(the_same_route_written_differently_is_unchanged) {
    /* object form, keys reordered, defaults spelled out, method case */
    ck_assert_uint_eq(
        changed_mask("{\"metadata\":{\"k\":\"v\"},\"order\":1,"
                     "\"filters\":[{\"name\":\"StripPrefix\",\"args\":"
                     "{\"parts\":\"1\"}}],"
                     "\"predicates\":[{\"name\":\"Path\",\"args\":{"
                     "\"patterns\":\"/a/**\",\"matchTrailingSlash\":true}},"
                     "{\"args\":{\"methods\":\"get\"},\"name\":\"Method\"}],"
                     "\"uri\":\"http://a:80\",\"id\":\"r\"}"),
        0);
}
END_TEST

static sy_router *router_with(const char *json) {
    sy_router *r;
    ck_assert_int_eq(sy_router_new(NULL, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    if (json)
        ck_assert_int_eq(
            sy_router_apply(r, "s", json, strlen(json), NULL, NULL), 0);
    return r;
}

START_TEST(snapshot_diff_agrees_with_the_apply_report) {
    const char *v1 = "[{\"id\":\"a\",\"uri\":\"http://a:80\"},"
                     "{\"id\":\"b\",\"uri\":\"http://b:80\"}]";
    const char *v2 = "[{\"id\":\"a\",\"uri\":\"http://a:80\",\"order\":5},"
                     "{\"id\":\"c\",\"uri\":\"http://c:80\"}]";
    sy_router *r = router_with(v1);
    sy_snapshot *s1 = sy_router_acquire(r);
    sy_report *rep;
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), &rep, NULL), 0);
    sy_snapshot *s2 = sy_router_acquire(r);
    sy_diff *d;
    ck_assert_int_eq(sy_diff_snapshots(s1, s2, NULL, &d, NULL), 0);
    const sy_diff *rd = sy_report_diff(rep);
    const sy_diff *both[2] = {d, rd};
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(sy_diff_added_count(both[i]), 1);
        ck_assert_str_eq(sy_diff_added(both[i], 0), "c");
        ck_assert_uint_eq(sy_diff_removed_count(both[i]), 1);
        ck_assert_str_eq(sy_diff_removed(both[i], 0), "b");
        unsigned mask;
        ck_assert_uint_eq(sy_diff_updated_count(both[i]), 1);
        ck_assert_str_eq(sy_diff_updated(both[i], 0, &mask), "a");
        ck_assert_uint_eq(mask, SY_CHANGED_ORDER);
        ck_assert_uint_eq(sy_diff_unchanged_count(both[i]), 0);
    }
    sy_diff_free(d);
    sy_report_free(rep);
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r);
}
END_TEST

#define R(id) "{\"id\":\"" id "\",\"uri\":\"http://" id ":80\"}"

/* The router's last INFO line (the apply's summary). */
static char last_info[512];
static void keep_info(void *data, sy_log_level level, const char *message) {
    (void)data;
    if (level == SY_LOG_INFO)
        snprintf(last_info, sizeof last_info, "%s", message);
}

/* The diff of v1 -> v2 three ways: documents, snapshots, apply report. */
static void three_diffs(const char *v1, const char *v2, sy_diff *out[3],
                        sy_report **rep, bool lenient) {
    out[0] = lenient ? NULL : diff_of(v1, v2); /* strict: v2 has an error */
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.lenient = lenient;
    o.on_log = keep_info;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    ck_assert_int_eq(sy_router_apply(r, "s", v1, strlen(v1), NULL, NULL), 0);
    sy_snapshot *s1 = sy_router_acquire(r);
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), rep, NULL), 0);
    sy_snapshot *s2 = sy_router_acquire(r);
    ck_assert_int_eq(sy_diff_snapshots(s1, s2, NULL, &out[1], NULL), 0);
    out[2] = (sy_diff *)sy_report_diff(*rep);
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r);
}

static void free_three(sy_diff *d[3], sy_report *rep) {
    sy_diff_free(d[0]);
    sy_diff_free(d[1]);
    sy_report_free(rep);
}

START_TEST(a_reorder_only_is_reported_reordered_not_updated) {
    /* d moved from last to first: d alone is reordered; nothing is
     * updated (a host that rebuilds updated routes drains none) */
    sy_diff *d[3];
    sy_report *rep;
    three_diffs("[" R("a") "," R("b") "," R("c") "," R("d") "]",
                "[" R("d") "," R("a") "," R("b") "," R("c") "]", d, &rep,
                false);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(sy_diff_added_count(d[i]), 0);
        ck_assert_uint_eq(sy_diff_removed_count(d[i]), 0);
        ck_assert_uint_eq(sy_diff_updated_count(d[i]), 0);
        ck_assert_uint_eq(sy_diff_unchanged_count(d[i]), 4);
        ck_assert_uint_eq(sy_diff_reordered_count(d[i]), 1);
        ck_assert_str_eq(sy_diff_reordered(d[i], 0), "d");
        ck_assert_ptr_null(sy_diff_reordered(d[i], 1));
    }
    ck_assert_msg(strstr(last_info, "0 added, 0 updated, 0 removed, "
                                    "4 unchanged, 1 reordered"),
                  "the apply's log line: %s", last_info);
    free_three(d, rep);
    /* two swapped pairs: one of each pair, in new rank order */
    three_diffs("[" R("a") "," R("b") "," R("c") "," R("d") "]",
                "[" R("b") "," R("a") "," R("d") "," R("c") "]", d, &rep,
                false);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(sy_diff_updated_count(d[i]), 0);
        ck_assert_uint_eq(sy_diff_reordered_count(d[i]), 2);
        ck_assert_str_eq(sy_diff_reordered(d[i], 0), "b");
        ck_assert_str_eq(sy_diff_reordered(d[i], 1), "d");
    }
    free_three(d, rep);
}
END_TEST

START_TEST(shifted_positions_in_the_same_order_are_not_reordered) {
    /* x added ahead and b removed: every kept route's position moved,
     * their relative order did not */
    sy_diff *d[3];
    sy_report *rep;
    three_diffs("[" R("a") "," R("b") "," R("c") "," R("e") "]",
                "[" R("x") "," R("a") "," R("c") "," R("e") "]", d, &rep,
                false);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(sy_diff_added_count(d[i]), 1);
        ck_assert_uint_eq(sy_diff_removed_count(d[i]), 1);
        ck_assert_uint_eq(sy_diff_unchanged_count(d[i]), 3);
        ck_assert_uint_eq(sy_diff_reordered_count(d[i]), 0);
        ck_assert_ptr_null(sy_diff_reordered(d[i], 0));
    }
    free_three(d, rep);
}
END_TEST

START_TEST(an_order_that_moves_a_route_past_another_is_both) {
    /* a's order 9 ranks it after b: a is updated (order), and one of the
     * two is reordered; c's order 9 ranks it where it was: not reordered */
    sy_diff *d[3];
    sy_report *rep;
    three_diffs("[" R("a") "," R("b") ",{\"id\":\"c\",\"uri\":\"http://c:80\""
                                      ",\"order\":3}]",
                "[{\"id\":\"a\",\"uri\":\"http://a:80\",\"order\":9}," R(
                    "b") ",{\"id\":\"c\",\"uri\":\"http://c:80\","
                         "\"order\":10}]",
                d, &rep, false);
    for (int i = 0; i < 3; i++) {
        unsigned mask;
        ck_assert_uint_eq(sy_diff_updated_count(d[i]), 2);
        ck_assert_str_eq(sy_diff_updated(d[i], 0, &mask), "a");
        ck_assert_uint_eq(mask, SY_CHANGED_ORDER);
        ck_assert_uint_eq(sy_diff_reordered_count(d[i]), 1);
        const char *id = sy_diff_reordered(d[i], 0);
        ck_assert(strcmp(id, "a") == 0 || strcmp(id, "b") == 0);
    }
    free_three(d, rep);
}
END_TEST

START_TEST(a_route_left_out_of_a_lenient_apply_is_not_reordered) {
    /* lenient: b is invalid in v2 and left out (removed); a and c swap */
    sy_diff *d[3];
    sy_report *rep;
    three_diffs("[" R("a") "," R("b") "," R("c") "]",
                "[" R("c") ",{\"id\":\"b\",\"uri\":\"http://b:80\","
                           "\"predicates\":[\"Nope=1\"]}," R("a") "]",
                d, &rep, true);
    ck_assert_uint_eq(sy_diff_removed_count(d[2]), 1);
    ck_assert_str_eq(sy_diff_removed(d[2], 0), "b");
    for (int i = 1; i < 3; i++) { /* the document diff errs on b */
        ck_assert_uint_eq(sy_diff_reordered_count(d[i]), 1);
        ck_assert_str_eq(sy_diff_reordered(d[i], 0), "c");
    }
    free_three(d, rep);
}
END_TEST

START_TEST(instance_changes_are_reported_by_id) {
    sy_router *r = router_with(NULL);
    sy_instance v1[] = {
        {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"i2", "10.0.0.2", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"i3", "10.0.0.3", 80, false, 1, SY_INSTANCE_UP, NULL, 0}};
    sy_report *rep;
    ck_assert_int_eq(sy_router_set_instances(r, "svc", v1, 3, &rep, NULL), 0);
    ck_assert_uint_eq(sy_report_instances_added_count(rep), 3);
    sy_report_free(rep);
    sy_instance v2[] = {
        {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"i2", "10.0.0.2", 80, false, 5, SY_INSTANCE_UP, NULL, 0},
        {"i4", "10.0.0.4", 80, false, 1, SY_INSTANCE_UP, NULL, 0}};
    ck_assert_int_eq(sy_router_set_instances(r, "svc", v2, 3, &rep, NULL), 0);
    ck_assert_uint_eq(sy_report_instances_added_count(rep), 1);
    ck_assert_str_eq(sy_report_instance_added(rep, 0), "i4");
    ck_assert_ptr_null(sy_report_instance_added(rep, 1));
    ck_assert_uint_eq(sy_report_instances_removed_count(rep), 1);
    ck_assert_str_eq(sy_report_instance_removed(rep, 0), "i3");
    ck_assert_ptr_null(sy_report_instance_removed(rep, 1));
    ck_assert_uint_eq(sy_report_instances_changed_count(rep), 1);
    ck_assert_str_eq(sy_report_instance_changed(rep, 0), "i2");
    ck_assert_ptr_null(sy_report_instance_changed(rep, 1));
    sy_report_free(rep);
    sy_instance_delta down = {SY_INSTANCE_STATE, {0}};
    down.instance.id = "i1";
    down.instance.state = SY_INSTANCE_DOWN;
    ck_assert_int_eq(sy_router_update_instances(r, "svc", &down, 1, &rep, NULL),
                     0);
    ck_assert_uint_eq(sy_report_instances_changed_count(rep), 1);
    ck_assert_str_eq(sy_report_instance_changed(rep, 0), "i1");
    ck_assert_ptr_null(sy_report_instance_changed(rep, 1));
    sy_report_free(rep);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("diff");
    tcase_add_test(tc, added_removed_and_unchanged_are_counted);
    tcase_add_test(tc, each_changed_part_is_named);
    tcase_add_test(tc, the_same_route_written_differently_is_unchanged);
    tcase_add_test(tc, snapshot_diff_agrees_with_the_apply_report);
    tcase_add_test(tc, a_reorder_only_is_reported_reordered_not_updated);
    tcase_add_test(tc, shifted_positions_in_the_same_order_are_not_reordered);
    tcase_add_test(tc, an_order_that_moves_a_route_past_another_is_both);
    tcase_add_test(tc, a_route_left_out_of_a_lenient_apply_is_not_reordered);
    tcase_add_test(tc, instance_changes_are_reported_by_id);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
