--[[
job_submit.lua for hadar: hold the jobs tagged for hadar, and keep users' hands off them.

WHAT IT DOES
  hadar-slurmd (the hadar daemon beside slurmctld) places the jobs that users tag with
  `sbatch --comment=hadar ...`. Slurm's own scheduler must never start such a job, and
  users must not start or re-target it behind hadar's back. This script does both:

  * slurm_job_submit: a job whose comment is a hadar tag (see TAG RULE) gets priority 0,
    so it stays PENDING with reason JobHeldUser until hadar places it (`scontrol update
    JobId=X NodeList=...`) and releases it (`scontrol release X`). Untagged jobs are not
    touched. Every task of a tagged job array is held.

  * slurm_job_modify: every `scontrol update` of a TAGGED job is refused unless it comes
    from root or from a uid listed in HADAR_BRIDGE_UIDS below: `scontrol release`, `hold`,
    `uhold`, and updates of NodeList=, Priority=, Gres=, TimeLimit=, Comment=, ... alike.
    scontrol prints "Access/permission denied for job N" and exits 1; slurmctld's log
    says why ("hadar: job N is managed by hadar ..."). The owner can still cancel the
    job: `scancel` does not go through this hook.
    A non-admin cannot tag an untagged job after submission either (an update to
    Comment=hadar... is refused the same way; resubmit with --comment=hadar instead): a
    tag added later would not be held, so Slurm could start the job before hadar sees it,
    and hadar would find a running job it never placed. An admin (root or a
    HADAR_BRIDGE_UIDS uid) may tag an existing job; that does NOT hold it (`scontrol hold`
    it first if it must wait for hadar).

  * Progress reporting: because of the guard, a job cannot report progress by changing
    its own Slurm record (`scontrol update JobId=$SLURM_JOB_ID Comment=...` is refused);
    tagged jobs report progress to hadar directly (`hadar report`, see
    docs/user-guide.md), never through Slurm.

  Known limit: `scontrol requeue` of a RUNNING tagged job is not a job update and does
  not go through this hook; the requeued job is not held again and Slurm restarts it
  itself.

TAG RULE
  The comment is exactly "hadar", or starts with "hadar " (one space) followed by
  parameters, e.g. "hadar model=resnet50 steps=1000". "hadarx", " hadar" and "HADAR"
  are not tags.

INSTALL (tested with Slurm 22.05.8 from Debian 12, whose job_submit_lua.so links Lua 5.1;
the script uses only Lua 5.1 features)
  1. Copy this file next to slurm.conf as job_submit.lua (e.g. /etc/slurm/job_submit.lua),
     readable by SlurmUser.
  2. In slurm.conf: JobSubmitPlugins=lua (if the line exists, add lua to its list:
     JobSubmitPlugins=all_partitions,lua).
  3. Set HADAR_BRIDGE_UIDS below to the uid(s) hadar-slurmd runs as. Root (0) is always
     allowed. Add SlurmUser's uid if that is not root and tools running as SlurmUser must
     manage tagged jobs.
  4. `scontrol reconfigure`. slurmctld logs "hadar: holding job ..." on each tagged submit.
  Rollback: remove lua from JobSubmitPlugins (or remove the file) and `scontrol
  reconfigure`, then release the held tagged jobs (`hadar-slurmd --release-all`, or
  `scontrol release <ids>` as root).

MERGING WITH AN EXISTING job_submit.lua
  Slurm loads one job_submit.lua. Keep your script: paste the "hadar" section below
  (from HADAR_BRIDGE_UIDS to hadar_job_modify) at its top, then begin your
  slurm_job_submit with
      local rc = hadar_job_submit(job_desc, part_list, submit_uid)
      if rc ~= slurm.SUCCESS then return rc end
  and your slurm_job_modify with
      local rc = hadar_job_modify(job_desc, job_rec, part_list, modify_uid)
      if rc ~= slurm.SUCCESS then return rc end
  Do not set job_desc.priority of tagged jobs after that, or Slurm may start them.
--]]

------------------------------------------------------------------------------ hadar --

-- Uids allowed to modify (release, re-target) tagged jobs besides root: the uid that
-- hadar-slurmd runs as. Example: HADAR_BRIDGE_UIDS = { 0, 990 }
HADAR_BRIDGE_UIDS = { 0 }

-- Send the explanation of a refused update to the user with slurm.log_user. Slurm 24.11
-- shows it to the user (scontrol prints it); 22.05 does not support log_user in job_modify
-- and only logs "Use of log.user() in job_modify is not supported. Message discarded"
-- (harmless). The explanation always goes to slurmctld's log too.
HADAR_LOG_USER_ON_MODIFY = true

-- Return code of a refused update: ESLURM_ACCESS_DENIED where the plugin defines it (22.05
-- does), so scontrol prints "Access/permission denied for job N"; else slurm.ERROR
-- ("Unspecified error for job N").
local HADAR_DENIED = slurm.ESLURM_ACCESS_DENIED or slurm.ERROR

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

function hadar_job_submit(job_desc, part_list, submit_uid)
	if hadar_tagged(job_desc.comment) then
		job_desc.priority = 0
		slurm.log_info("hadar: holding job %s of uid %s submitted with comment '%s'",
			tostring(job_desc.name), tostring(submit_uid), tostring(job_desc.comment))
		-- sbatch prints this: the user learns that JobHeldUser is hadar's hold.
		slurm.log_user("hadar: this job is scheduled by hadar: it stays pending (JobHeldUser) until hadar places it on the GPU type where it runs best; `hadar explain <jobid>` says why it waits")
	end
	return slurm.SUCCESS
end

function hadar_job_modify(job_desc, job_rec, part_list, modify_uid)
	if hadar_bridge_uid(modify_uid) then
		return slurm.SUCCESS
	end
	local id = tostring(job_rec.job_id)
	local msg
	if hadar_tagged(job_rec.comment) then
		msg = "hadar: job " .. id .. " is managed by hadar; only the hadar scheduler can " ..
			"release, hold or change it (scancel still works)"
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
