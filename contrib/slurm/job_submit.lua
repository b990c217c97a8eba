--[[
job_submit.lua for hadar: tagged jobs wait for hadar on a renewed begin-time lease, and
users keep their hands off what hadar decides.

WHAT IT DOES
  hadar-slurmd (the hadar daemon beside slurmctld) places the jobs that users tag with
  `sbatch --comment=hadar ...`: it chooses their nodes, and so their GPU type. Slurm's own
  scheduler must not start such a job before hadar has placed it, but the site's policy
  (priority, fairshare, QOS and association limits, reservations, holds, dependencies,
  --begin) must hold for it as for every other job, and if hadar stops, Slurm must
  schedule the job alone. This script does that with a begin-time lease:

  * slurm_job_submit: a job whose comment is a hadar tag (see TAG RULE) gets its begin
    time set to max(its own --begin, now) + HADAR_LEASE_SECONDS. It stays PENDING with
    reason BeginTime, keeps its priority (squeue %Q and sprio show the site's priority),
    and hadar-slurmd, while it runs, renews the lease of every job it has not placed
    yet and places the others (`scontrol update JobId=X NodeList=... StartTime=now`).
    If hadar-slurmd dies or hangs, no one renews the leases: each job becomes Slurm's
    within HADAR_LEASE_SECONDS (fail-open with nothing to run). A user's own --begin
    is kept: hadar reads it back as the begin time minus the lease and places no job
    before it. Holds (`sbatch -H`, `scontrol hold`) are not hadar's: hadar never
    releases them and places a held job only once its owner or the admin released it.
    Untagged jobs are not touched. Every task of a tagged job array gets the lease.

  * slurm_job_modify: a user (any uid but root and HADAR_BRIDGE_UIDS) may do to a
    tagged job what Slurm lets him do to any job (hold and release it, lower its
    priority with nice, shorten its time limit, ...), except what would take it from
    hadar or re-target it: Comment=, NodeList=, ExcNodeList=, Features=, Gres= and the
    other GPU requests, NumNodes= are refused ("Access/permission denied for job N";
    slurmctld's log says why). A new begin time (StartTime=) is kept as the user's
    --begin: it gets the lease on top, as at submission. The owner can always cancel.
    A non-admin cannot tag an untagged job after submission either (resubmit with
    --comment=hadar): a tag added later would have no lease. An admin (root or a
    HADAR_BRIDGE_UIDS uid) may change anything; tagging an existing job as admin sets
    no lease.

  * Progress reporting: tagged jobs report progress to hadar directly (`hadar report`,
    see docs/user-guide.md), never through their Slurm record.

  Known limit: `scontrol requeue` of a RUNNING tagged job is not a job update and does
  not go through this hook; Slurm gives the requeued job its own begin time (now + 120 s
  in 22.05), which hadar reads as a lease.

TAG RULE
  The comment is exactly "hadar", or starts with "hadar " (one space) followed by
  parameters, e.g. "hadar model=resnet50 steps=1000". "hadarx", " hadar" and "HADAR"
  are not tags.

INSTALL (tested with Slurm 22.05.8 from Debian 12, whose job_submit_lua.so links Lua 5.1,
and 24.11 from Debian 13; the script uses only Lua 5.1 features)
  1. Copy this file next to slurm.conf as job_submit.lua (e.g. /etc/slurm/job_submit.lua),
     readable by SlurmUser.
  2. In slurm.conf: JobSubmitPlugins=lua (if the line exists, add lua to its list:
     JobSubmitPlugins=all_partitions,lua).
  3. Set HADAR_BRIDGE_UIDS below to the uid(s) hadar-slurmd runs as. Root (0) is always
     allowed. Set HADAR_LEASE_SECONDS to hadar.toml's `lease` (hadar-slurmd checks that
     they agree when it can read this file, next to slurm.conf).
  4. `scontrol reconfigure`. slurmctld logs "hadar: lease on job ..." on each tagged
     submit.
  Rollback: remove lua from JobSubmitPlugins (or remove the file) and `scontrol
  reconfigure`; stop hadar-slurmd. Leases already given run out by themselves within
  HADAR_LEASE_SECONDS (`hadar-slurmd --release-all` ends them at once).

MERGING WITH AN EXISTING job_submit.lua
  Slurm loads one job_submit.lua. Keep your script: paste the "hadar" section below
  (from HADAR_BRIDGE_UIDS to hadar_job_modify) at its top, then begin your
  slurm_job_submit with
      local rc = hadar_job_submit(job_desc, part_list, submit_uid)
      if rc ~= slurm.SUCCESS then return rc end
  and your slurm_job_modify with
      local rc = hadar_job_modify(job_desc, job_rec, part_list, modify_uid)
      if rc ~= slurm.SUCCESS then return rc end
  Do not set job_desc.begin_time of tagged jobs after that.
--]]

------------------------------------------------------------------------------ hadar --

-- Uids allowed to modify (place, re-target) tagged jobs besides root: the uid that
-- hadar-slurmd runs as. Example: HADAR_BRIDGE_UIDS = { 0, 990 }
HADAR_BRIDGE_UIDS = { 0 }

-- How long a tagged job waits for hadar before Slurm may start it alone, in seconds:
-- the lease hadar-slurmd renews while it runs. It must equal hadar.toml's `lease`
-- (default 120 s); it bounds how long jobs wait when hadar-slurmd is dead or hung.
HADAR_LEASE_SECONDS = 120

-- Send the explanation of a refused update to the user with slurm.log_user. Slurm 24.11
-- shows it to the user (scontrol prints it); 22.05 does not support log_user in job_modify
-- and only logs "Use of log.user() in job_modify is not supported. Message discarded"
-- (harmless). The explanation always goes to slurmctld's log too.
HADAR_LOG_USER_ON_MODIFY = true

-- Return code of a refused update: ESLURM_ACCESS_DENIED where the plugin defines it (22.05
-- does), so scontrol prints "Access/permission denied for job N"; else slurm.ERROR
-- ("Unspecified error for job N").
local HADAR_DENIED = slurm.ESLURM_ACCESS_DENIED or slurm.ERROR

-- Slurm's "not set" value of numeric fields in an update (NO_VAL).
local HADAR_NO_VAL = 4294967294

-- The fields of an update a user may not change on a tagged job: they would take it
-- from hadar (Comment) or re-target it behind hadar's back.
local HADAR_GUARDED_TEXT = { "comment", "req_nodes", "exc_nodes", "features", "tres_per_node",
	"tres_per_job", "tres_per_task", "tres_per_socket", "cpus_per_tres", "mem_per_tres" }
local HADAR_GUARDED_COUNT = { "min_nodes", "max_nodes" }

local function hadar_tagged(comment)
	if comment == nil then
		return false
	end
	comment = tostring(comment)
	return comment == "hadar" or string.sub(comment, 1, 6) == "hadar "
end

local function hadar_bridge_uid(uid)
	uid = tonumber(uid)
	if uid == 0 then
		return true
	end
	for _, u in ipairs(HADAR_BRIDGE_UIDS) do
		if tonumber(u) == uid then
			return true
		end
	end
	return false
end

-- hadar_printable is user text made safe for slurmctld's log: control bytes and
-- backslashes escaped, at most 200 bytes, so a comment cannot forge log lines.
local function hadar_printable(text)
	text = tostring(text)
	if string.len(text) > 200 then
		text = string.sub(text, 1, 200) .. "..."
	end
	return (string.gsub(text, "[%c\\\127-\255]", function(c)
		return string.format("\\%03d", string.byte(c))
	end))
end

-- hadar_lease is the begin time of a tagged job: its user's begin time, or now if
-- that is unset or past, plus the lease. hadar-slurmd reads the user's begin time
-- back as this minus HADAR_LEASE_SECONDS.
local function hadar_lease(begin_time)
	local now = os.time()
	local begin = tonumber(begin_time) or 0
	if begin < now or begin >= HADAR_NO_VAL then
		begin = now
	end
	return begin + HADAR_LEASE_SECONDS
end

function hadar_job_submit(job_desc, part_list, submit_uid)
	if hadar_tagged(job_desc.comment) then
		job_desc.begin_time = hadar_lease(job_desc.begin_time)
		slurm.log_info("hadar: lease on job %s of uid %s until %s, comment '%s'",
			hadar_printable(job_desc.name), tostring(submit_uid), tostring(job_desc.begin_time),
			hadar_printable(job_desc.comment))
		-- sbatch prints this: the user learns why the job shows BeginTime.
		slurm.log_user("hadar: this job is scheduled by hadar: it waits (reason BeginTime) until hadar places it on the GPU type where it runs best, in the site's priority order; `hadar explain <jobid>` says why it waits")
	end
	return slurm.SUCCESS
end

-- hadar_guarded returns the first field of an update a user may not change on a
-- tagged job, or nil.
local function hadar_guarded(job_desc)
	for _, f in ipairs(HADAR_GUARDED_TEXT) do
		if job_desc[f] ~= nil then
			return f
		end
	end
	for _, f in ipairs(HADAR_GUARDED_COUNT) do
		local v = tonumber(job_desc[f])
		if v ~= nil and v ~= HADAR_NO_VAL then
			return f
		end
	end
	return nil
end

function hadar_job_modify(job_desc, job_rec, part_list, modify_uid)
	if hadar_bridge_uid(modify_uid) then
		return slurm.SUCCESS
	end
	local id = tostring(job_rec.job_id)
	local msg
	if hadar_tagged(job_rec.comment) then
		local field = hadar_guarded(job_desc)
		if field == nil then
			local begin = tonumber(job_desc.begin_time) or 0
			if begin ~= 0 then
				-- A new --begin: the user's, with the lease on top.
				job_desc.begin_time = hadar_lease(begin)
			end
			return slurm.SUCCESS
		end
		msg = "hadar: job " .. id .. " is scheduled by hadar; its " .. field .. " can only be " ..
			"changed by hadar (hold, release, nice, time limit and scancel work)"
	elseif hadar_tagged(job_desc.comment) then
		msg = "hadar: job " .. id .. " cannot be tagged for hadar after submission; " ..
			"resubmit it with --comment=hadar"
	else
		return slurm.SUCCESS
	end
	slurm.log_info("%s: update by uid %s refused", msg, tostring(modify_uid))
	if HADAR_LOG_USER_ON_MODIFY then
		slurm.log_user("%s", msg)
	end
	return HADAR_DENIED
end

-------------------------------------------------------------------------- end hadar --

function slurm_job_submit(job_desc, part_list, submit_uid)
	return hadar_job_submit(job_desc, part_list, submit_uid)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return hadar_job_modify(job_desc, job_rec, part_list, modify_uid)
end

return slurm.SUCCESS
