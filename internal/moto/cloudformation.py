"""Teaches moto's CloudFormation what Outflow's stack needs and moto lacks.

moto 5.2.5 cannot create AWS::CloudWatch::Alarm, AWS::Scheduler::Schedule
or AWS::Lambda::EventInvokeConfig (a stack naming them fails, or skips
them), names a FIFO queue without QueueName without the ".fifo" suffix
CloudFormation gives it (so SQS refuses it), drops a function's
Architectures (LoggingConfig it does not keep at all), and a table's TTL,
point in time recovery and encryption, and keeps a role's inline policies
as Python dicts (GetRolePolicy returns their repr), and DescribeStacks
gives a list parameter's value as a Python list's repr. Each resource below is created through the
same moto backend call the service's API makes, with CloudFormation's
property names (the APIs' own), so the deployed stack can be read back
through the real APIs: DescribeAlarms, GetSchedule,
GetFunctionEventInvokeConfig, GetQueueAttributes, GetFunction.

moto also cannot update a stack whose table, log groups or the resources
above change (it has no update for them, loses the resource, and the
update fails on the first reference to it). A table is updated in place as
CloudFormation updates it, refusing what CloudFormation refuses: a change
to an existing global secondary index's key schema or projection. Log
groups take their new retention in place; the types above are replaced.

Only CloudFormation stacks use this; nothing else in moto changes.
"""
import copy

from moto.core.common_models import CloudFormationModel


def _number(v, kind):
    """CloudFormation passes a parameter's Ref as a string and converts it
    to the property's type; so does this."""
    return None if v is None else kind(v)


class _OutflowAlarm(CloudFormationModel):
    # moto files each model under the service its module names.
    __module__ = "moto.cloudwatch.models"

    def __init__(self, alarm):
        self.alarm = alarm

    @staticmethod
    def cloudformation_name_type():
        return "AlarmName"

    @staticmethod
    def cloudformation_type():
        return "AWS::CloudWatch::Alarm"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.cloudwatch.models import Dimension, Metric, MetricDataQuery, MetricStat, cloudwatch_backends

        p = cloudformation_json["Properties"]
        queries = None
        if p.get("Metrics"):
            queries = []
            for q in p["Metrics"]:
                stat = None
                if "MetricStat" in q:
                    ms = q["MetricStat"]
                    m = ms["Metric"]
                    dims = [Dimension(d["Name"], d["Value"]) for d in m.get("Dimensions", [])]
                    stat = MetricStat(
                        Metric(m["MetricName"], m.get("Namespace"), dims),
                        _number(ms.get("Period"), int),
                        ms.get("Stat"),
                        ms.get("Unit"),
                    )
                queries.append(
                    MetricDataQuery(
                        q["Id"], q.get("Label"), _number(q.get("Period"), int), q.get("ReturnData"), q.get("Expression"), stat
                    )
                )
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=resource_name,
            namespace=p.get("Namespace"),
            metric_name=p.get("MetricName"),
            metric_data_queries=queries,
            comparison_operator=p.get("ComparisonOperator"),
            evaluation_periods=_number(p.get("EvaluationPeriods"), int),
            datapoints_to_alarm=_number(p.get("DatapointsToAlarm"), int),
            period=_number(p.get("Period"), int),
            threshold=_number(p.get("Threshold"), float),
            statistic=p.get("Statistic"),
            description=p.get("AlarmDescription"),
            dimensions=p.get("Dimensions", []),
            alarm_actions=p.get("AlarmActions", []),
            ok_actions=p.get("OKActions", []),
            insufficient_data_actions=p.get("InsufficientDataActions", []),
            unit=p.get("Unit"),
            actions_enabled=p.get("ActionsEnabled", True),
            treat_missing_data=p.get("TreatMissingData"),
        )
        return cls(alarm)

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name):
        from moto.cloudwatch.models import cloudwatch_backends

        cloudwatch_backends[account_id][region_name].delete_alarms([resource_name])

    @classmethod
    def update_from_cloudformation_json(
        cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
    ):
        # Replaced under a new generated name, as CloudFormation replaces an
        # alarm whose AlarmName it generates.
        cls.delete_from_cloudformation_json(original_resource.alarm.name, cloudformation_json, account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    @property
    def physical_resource_id(self):
        return self.alarm.name

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name):
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name == "Arn":
            return self.alarm.alarm_arn
        raise UnformattedGetAttTemplateException()


class _OutflowSchedule(CloudFormationModel):
    # moto files each model under the service its module names.
    __module__ = "moto.scheduler.models"

    def __init__(self, schedule):
        self.schedule = schedule

    @staticmethod
    def cloudformation_name_type():
        return "Name"

    @staticmethod
    def cloudformation_type():
        return "AWS::Scheduler::Schedule"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.scheduler.models import scheduler_backends

        p = copy.deepcopy(cloudformation_json["Properties"])
        retry = p.get("Target", {}).get("RetryPolicy")
        for k in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds"):
            if retry and k in retry:
                retry[k] = int(retry[k])
        schedule = scheduler_backends[account_id][region_name].create_schedule(
            description=p.get("Description"),
            end_date=p.get("EndDate"),
            flexible_time_window=p.get("FlexibleTimeWindow"),
            group_name=p.get("GroupName"),
            kms_key_arn=p.get("KmsKeyArn"),
            name=resource_name,
            schedule_expression=p.get("ScheduleExpression"),
            schedule_expression_timezone=p.get("ScheduleExpressionTimezone"),
            start_date=p.get("StartDate"),
            state=p.get("State"),
            target=p.get("Target"),
            action_after_completion=None,
        )
        return cls(schedule)

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name):
        from moto.scheduler.models import scheduler_backends

        scheduler_backends[account_id][region_name].delete_schedule(
            cloudformation_json["Properties"].get("GroupName"), resource_name
        )

    @classmethod
    def update_from_cloudformation_json(
        cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
    ):
        from moto.scheduler.models import scheduler_backends

        scheduler_backends[account_id][region_name].delete_schedule(
            original_resource.schedule.group_name, original_resource.schedule.name
        )
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    @property
    def physical_resource_id(self):
        return self.schedule.name

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name):
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name == "Arn":
            return self.schedule.arn
        raise UnformattedGetAttTemplateException()


class _OutflowEventInvokeConfig(CloudFormationModel):
    # moto files each model under the service its module names.
    __module__ = "moto.awslambda.models"

    def __init__(self, function_name):
        self.function_name = function_name

    @staticmethod
    def cloudformation_name_type():
        return ""

    @staticmethod
    def cloudformation_type():
        return "AWS::Lambda::EventInvokeConfig"

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.awslambda.models import lambda_backends

        p = cloudformation_json["Properties"]
        config = {"DestinationConfig": p.get("DestinationConfig") or {}}
        for k in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds"):
            if k in p:
                config[k] = int(p[k])
        lambda_backends[account_id][region_name].put_function_event_invoke_config(p["FunctionName"], config)
        return cls(p["FunctionName"])

    @classmethod
    def update_from_cloudformation_json(
        cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
    ):
        # PutFunctionEventInvokeConfig replaces the function's whole config.
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    @property
    def physical_resource_id(self):
        return self.function_name


def _fifo_names(create):
    """CloudFormation names a FIFO queue it names itself with the ".fifo"
    suffix SQS requires, within the 80 characters of a queue name."""

    def created(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        p = cloudformation_json.get("Properties", {})
        fifo = str(p.get("FifoQueue", "false")).lower() == "true"
        if fifo and "QueueName" not in p and not str(resource_name).endswith(".fifo"):
            resource_name = str(resource_name)[:75] + ".fifo"
        return create(resource_name, cloudformation_json, account_id, region_name, **kwargs)

    return classmethod(created)


def _full_functions(create):
    """moto's CloudFormation passes CreateFunction only some of a function's
    properties, and as given: a Ref of a String parameter stays a string.
    CloudFormation passes them all (same names), converted to the property's
    type, so a stack's Architectures and reservation reach the function."""

    def created(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        cloudformation_json = copy.deepcopy(cloudformation_json)
        p = cloudformation_json.get("Properties", {})
        for k in ("MemorySize", "Timeout", "ReservedConcurrentExecutions"):
            if k in p:
                p[k] = _number(p[k], int)
        fn = create(resource_name, cloudformation_json, account_id, region_name, **kwargs)
        if "Architectures" in p:
            fn.architectures = p["Architectures"]
        return fn

    return classmethod(created)


def _full_tables(create):
    """moto's CloudFormation creates a table without its TTL and point in
    time recovery, and reads SSESpecification with the API's key (Enabled)
    where CloudFormation's is SSEEnabled. CloudFormation applies all three,
    as UpdateTimeToLive and UpdateContinuousBackups do."""

    def created(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        from moto.dynamodb.models import dynamodb_backends

        cloudformation_json = copy.deepcopy(cloudformation_json)
        p = cloudformation_json.get("Properties", {})
        sse = p.get("SSESpecification")
        if sse is not None and "SSEEnabled" in sse:
            sse["Enabled"] = str(sse.pop("SSEEnabled")).lower() == "true"
        table = create(resource_name, cloudformation_json, account_id, region_name, **kwargs)
        backend = dynamodb_backends[account_id][region_name]
        ttl = p.get("TimeToLiveSpecification")
        if ttl is not None:
            ttl = dict(ttl, Enabled=str(ttl.get("Enabled", False)).lower() == "true")
            backend.update_time_to_live(table.name, ttl)
        pitr = p.get("PointInTimeRecoverySpecification")
        if pitr is not None:
            on = str(pitr.get("PointInTimeRecoveryEnabled", False)).lower() == "true"
            backend.update_continuous_backups(table.name, dict(pitr, PointInTimeRecoveryEnabled=on))
        return table

    return classmethod(created)


def _bool(v):
    """CloudFormation's Boolean from a template value: true, "true"."""
    return str(v).lower() == "true"


def _update_tables(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    """CloudFormation updates a table in place. It refuses to change an
    existing global secondary index's key schema or projection ("Cannot
    update GSI's properties other than Provisioned Throughput and
    Contributor Insights Specification"): so does this, which is what makes
    a stack deployed before ordered groups (due index without prev and seq)
    fail to update unless DueIndexProjection keeps its index. Adding or
    deleting an index, which CloudFormation does one per update, is not
    done here and is refused as well. Deletion protection, TTL and point in
    time recovery are applied as UpdateTable, UpdateTimeToLive and
    UpdateContinuousBackups apply them."""
    from moto.cloudformation.exceptions import ValidationError
    from moto.dynamodb.models import dynamodb_backends

    table = original_resource
    p = cloudformation_json.get("Properties", {})
    existing = {ix.name: ix for ix in table.global_indexes}
    wanted = {ix["IndexName"]: ix for ix in p.get("GlobalSecondaryIndexes", [])}
    if set(existing) != set(wanted):
        raise ValidationError(
            message=f"Table {table.name}: adding or deleting a global secondary index is not supported by this moto fix"
        )

    def projection(pr):
        return (pr.get("ProjectionType"), sorted(pr.get("NonKeyAttributes") or []))

    for name, ix in wanted.items():
        old = existing[name]
        if ix.get("KeySchema") != old.schema or projection(ix.get("Projection") or {}) != projection(old.projection or {}):
            raise ValidationError(
                message="Cannot update GSI's properties other than Provisioned Throughput and Contributor "
                "Insights Specification. You can create a new GSI with a different name. (index " + name + ")"
            )
    backend = dynamodb_backends[account_id][region_name]
    table.deletion_protection_enabled = _bool(p.get("DeletionProtectionEnabled", False))
    ttl = p.get("TimeToLiveSpecification")
    if ttl is not None:
        backend.update_time_to_live(table.name, dict(ttl, Enabled=_bool(ttl.get("Enabled", False))))
    pitr = p.get("PointInTimeRecoverySpecification")
    if pitr is not None:
        on = _bool(pitr.get("PointInTimeRecoveryEnabled", False))
        backend.update_continuous_backups(table.name, dict(pitr, PointInTimeRecoveryEnabled=on))
    return table


def _update_log_groups(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    """A log group keeps its name (the template sets LogGroupName) and takes
    its new retention, as PutRetentionPolicy sets it."""
    from moto.logs.models import logs_backends

    days = cloudformation_json.get("Properties", {}).get("RetentionInDays")
    if days is not None:
        logs_backends[account_id][region_name].put_retention_policy(original_resource.name, int(days))
    return original_resource


def _json_role_policies(create):
    """moto's CloudFormation keeps a role's inline policy documents as the
    parsed template's dicts, and GetRolePolicy then returns their Python
    repr. CloudFormation sends each as JSON, as PutRolePolicy does, and
    keeps it so, as moto's own AWS::IAM::Policy does."""

    def created(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        import json

        role = create(resource_name, cloudformation_json, account_id, region_name, **kwargs)
        for name, doc in list(role.policies.items()):
            if isinstance(doc, dict):
                role.policies[name] = json.dumps(doc)
        return role

    return classmethod(created)


def _echoed_lists(parameter_list):
    """DescribeStacks gives a list parameter's value as it was given,
    "a,b"; moto gives the Python repr of the list it split it into."""

    def echoed(self):
        return [
            dict(p, ParameterValue=",".join(p["ParameterValue"])) if isinstance(p["ParameterValue"], list) else p
            for p in parameter_list.fget(self)
        ]

    return property(echoed)


def _install_cloudformation_fixes():
    from moto.cloudformation.models import Stack
    from moto.awslambda.models import LambdaFunction
    from moto.iam.models import Role
    from moto.dynamodb.models.table import Table
    from moto.logs.models import LogGroup
    from moto.sqs.models import Queue

    Queue.create_from_cloudformation_json = _fifo_names(Queue.create_from_cloudformation_json)
    LambdaFunction.create_from_cloudformation_json = _full_functions(LambdaFunction.create_from_cloudformation_json)
    Table.create_from_cloudformation_json = _full_tables(Table.create_from_cloudformation_json)
    Role.create_from_cloudformation_json = _json_role_policies(Role.create_from_cloudformation_json)
    Table.update_from_cloudformation_json = classmethod(_update_tables)
    LogGroup.update_from_cloudformation_json = classmethod(_update_log_groups)
    Stack.parameter_list = _echoed_lists(Stack.parameter_list)


_install_cloudformation_fixes()
