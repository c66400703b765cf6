-- 007_model_version.sql — which write of a cost model a row holds (one text
-- for both backends).
--
-- version counts the writes of a target key's model: 1 for its first, and
-- one more for each store_model_put that replaced it.  The replicas that do
-- not hold a model's writer lease compare the version they loaded with the
-- row's, a few seconds apart and at the start of each job, and load the
-- model again when its writer saved a newer one.  A counter rather than the
-- row's `updated` time: replicas on several hosts do not share one clock,
-- and two writes in one clock tick must still differ.  Models saved before
-- this migration count as written once.

ALTER TABLE cost_models ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
